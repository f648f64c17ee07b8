"""The concept diagrams as files (docs/diagrams/, written by `scripts/tables.py`): well-formed SVG whose labels are
real <text>, named for screen readers, fetching nothing, current with their generator, and inlined whole by the
pages that show them. What a reader sees of them, in both themes and at both widths, is in test_browser.py."""

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from rtm_lab.paths import PROJECT_ROOT

SVG = "{http://www.w3.org/2000/svg}"
DIAGRAMS = PROJECT_ROOT / "docs" / "diagrams"
# File -> (the page that inlines it, the words it must carry as text).
EXPECTED = {
    "timeline.svg": ("concepts", ("source task", "shuffle", "commit", "boundary stall", "batch duration")),
    "timeline-narrow.svg": ("concepts", ("source task", "shuffle", "commit", "boundary stall", "batch duration")),
    "slots.svg": ("reference/slot-sizing", ("source task", "shuffle", "task slot", "202 task slots")),
}


def test_every_diagram_is_current_with_its_generator():
    # Only the diagrams' generators: test_tables.py checks every generated file, this one too, in one run of them all.
    for name in EXPECTED:
        command = [sys.executable, "scripts/tables.py", f"diagram-{name.removesuffix('.svg')}", "--check"]
        result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=PROJECT_ROOT)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"/docs/diagrams/{name} is up to date" in result.stdout, result.stdout
    assert sorted(p.name for p in DIAGRAMS.glob("*.svg")) == sorted(EXPECTED), "a diagram file nobody generates"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_diagram_labels_are_text_and_it_is_named_for_screen_readers(name):
    text = (DIAGRAMS / name).read_text(encoding="utf-8")
    root = ET.fromstring(text)
    words = [t.text or "" for t in root.iter(f"{SVG}text")]
    for label in EXPECTED[name][1]:
        assert any(label in w for w in words), f"{name}: no <text> with {label!r} in {words}"
    ids = {e.get("id"): (e.text or "").strip() for e in root.iter() if e.get("id")}
    assert root.get("role") == "img"
    labelled_by = root.get("aria-labelledby", "").split()
    assert [e.tag for e in root if e.get("id") in labelled_by] == [f"{SVG}title", f"{SVG}desc"], labelled_by
    assert all(ids[i] for i in labelled_by), labelled_by
    # Nothing from another host, and no blank line: inside a page's <figure> a blank line would end the raw HTML.
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    assert "\n\n" not in text


@pytest.mark.parametrize("name", list(EXPECTED))
def test_the_page_inlines_the_diagram_whole(built_site, name):
    page, _ = EXPECTED[name]
    html = (built_site / page / "index.html").read_text(encoding="utf-8")
    svg = (DIAGRAMS / name).read_text(encoding="utf-8").strip()
    # Verbatim inside its figure: no Markdown processing touched it (no <p> wrapped around it, nothing escaped).
    assert svg in html, f"{page}: the page does not hold {name} verbatim"
    assert "<p><svg" not in html, f"{page}: a diagram wrapped in a paragraph"
    figure = html[html.rindex('<figure class="rtm-diagram"', 0, html.index(svg)) :]
    assert figure.index(svg) < figure.index("</figure>"), f"{page}: {name} is not inside its figure"
