"""A few SVG elements as text: enough for a diagram whose words are real <text> a browser and a screen reader find.

Colours come from mkdocs-material's CSS variables, so an inlined diagram follows the reader's light or dark theme;
each variable has a fallback, so the file also reads on its own (in a code review, say).
"""

from collections.abc import Iterable
from xml.sax.saxutils import escape, quoteattr

from rtm_lab.generated import generated_note

# The font the theme uses for text, then the usual system ones: the site loads no web font (mkdocs.yml `font: false`).
FONT = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif"
MONO = "SFMono-Regular, Consolas, Menlo, monospace"
FONT_PX = 13

# Scoped to the diagram's own class: an inlined <style> applies to the whole page. The slate rules are the theme's
# dark scheme, where a light text colour and brighter accents keep the contrast.
STYLE = f"""
svg.rtm-svg {{
  --rtm-fg: var(--md-default-fg-color, rgba(0, 0, 0, 0.87));
  --rtm-muted: var(--md-default-fg-color--light, rgba(0, 0, 0, 0.54));
  --rtm-source: var(--md-typeset-a-color, #4051b5);
  --rtm-shuffle: #c25e00;
  --rtm-stall: #c62828;
  font-family: {FONT};
  font-size: {FONT_PX}px;
}}
[data-md-color-scheme="slate"] svg.rtm-svg {{
  --rtm-shuffle: #ffa040;
  --rtm-stall: #ff7b72;
}}
svg.rtm-svg text {{ fill: var(--rtm-fg); }}
svg.rtm-svg .muted {{ fill: var(--rtm-muted); }}
svg.rtm-svg .heading {{ font-weight: 700; }}
svg.rtm-svg .code {{ font-family: {MONO}; font-size: 12px; }}
svg.rtm-svg .line {{ stroke: var(--rtm-fg); stroke-width: 1.5; fill: none; }}
svg.rtm-svg .thin {{ stroke: var(--rtm-muted); stroke-width: 1; fill: none; }}
svg.rtm-svg .slot {{ stroke: var(--rtm-muted); stroke-width: 1; stroke-dasharray: 4 3; fill: none; }}
svg.rtm-svg .source {{ fill: var(--rtm-source); fill-opacity: 0.22; stroke: var(--rtm-source); stroke-width: 1.5; }}
svg.rtm-svg .shuffle {{ fill: var(--rtm-shuffle); fill-opacity: 0.22; stroke: var(--rtm-shuffle); stroke-width: 1.5; }}
svg.rtm-svg .record {{ fill: var(--rtm-fg); }}
svg.rtm-svg .stall {{ fill: var(--rtm-stall); fill-opacity: 0.18; stroke: var(--rtm-stall); stroke-dasharray: 3 2; }}
svg.rtm-svg text.stall-label {{ fill: var(--rtm-stall); font-weight: 700; }}
svg.rtm-svg .commit {{ stroke: var(--rtm-fg); stroke-width: 2.5; }}
svg.rtm-svg .arrowhead {{ fill: var(--rtm-fg); }}
svg.rtm-svg .warn {{ fill: var(--rtm-stall); fill-opacity: 0.10; stroke: var(--rtm-stall); stroke-width: 1; }}
""".strip()


def _attrs(attrs: dict[str, object]) -> str:
    # `class_` for the reserved word; other underscores are SVG's hyphens (stroke_width -> stroke-width).
    return "".join(f" {key.rstrip('_').replace('_', '-')}={quoteattr(str(value))}" for key, value in attrs.items())


def rect(x: float, y: float, width: float, height: float, cls: str, rx: float = 3) -> str:
    return (
        f"<rect{_attrs({'x': _n(x), 'y': _n(y), 'width': _n(width), 'height': _n(height), 'rx': rx, 'class_': cls})}/>"
    )


def line(x1: float, y1: float, x2: float, y2: float, cls: str = "line", arrow: bool = False) -> str:
    attrs: dict[str, object] = {"x1": _n(x1), "y1": _n(y1), "x2": _n(x2), "y2": _n(y2), "class_": cls}
    if arrow:
        attrs["marker-end"] = "url(#{arrow})"
    return f"<line{_attrs(attrs)}/>"


def circle(x: float, y: float, r: float, cls: str) -> str:
    return f"<circle{_attrs({'cx': _n(x), 'cy': _n(y), 'r': r, 'class_': cls})}/>"


def text(x: float, y: float, words: str, cls: str = "", anchor: str = "start") -> str:
    attrs: dict[str, object] = {"x": _n(x), "y": _n(y)}
    if anchor != "start":
        attrs["text-anchor"] = anchor
    if cls:
        attrs["class_"] = cls
    return f"<text{_attrs(attrs)}>{escape(words)}</text>"


def _n(value: float) -> str:
    """Coordinates to a tenth of a pixel: stable text for the `--check` comparison, short files."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def document(ident: str, width: float, height: float, title: str, desc: str, body: Iterable[str], command: str) -> str:
    """A whole <svg>: its title and description name it for screen readers (role="img"), the marker is the
    arrowhead every `line(arrow=True)` uses, and `ident` keeps those ids apart when two diagrams share a page.
    `command` is what writes the file, named in it for whoever opens it to edit."""
    arrow = f"{ident}-arrow"
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rtm-svg" id="{ident}" width="{_n(width)}" '
        f'height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}" role="img" '
        f'aria-labelledby="{ident}-title {ident}-desc">',
        generated_note(command),
        f'<title id="{ident}-title">{escape(title)}</title>',
        f'<desc id="{ident}-desc">{escape(desc)}</desc>',
        f"<style>\n{STYLE}\n</style>",
        f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path class="arrowhead" d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>',
        *(element.replace("url(#{arrow})", f"url(#{arrow})") for element in body),
        "</svg>",
    ]
    return "\n".join(lines) + "\n"
