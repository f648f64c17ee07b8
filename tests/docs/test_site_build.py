"""The site builds with `mkdocs build --strict` (broken links, missing includes and nav problems fail it)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_strict_build_renders_every_page(built_site):
    pages = sorted(p.relative_to(ROOT / "docs") for p in (ROOT / "docs").rglob("*.md"))
    pages = [p for p in pages if p.parts[0] != "results"]
    assert pages, "docs/ has no pages"
    for page in pages:
        html = built_site / ("index.html" if page.name == "index.md" else page.with_suffix("") / "index.html")
        assert html.is_file(), f"{page} was not built into {html.relative_to(built_site)}"
    assert (built_site / "search" / "search_index.json").is_file()


def test_snippet_code_reaches_the_page(built_site):
    """The get-started page shows the quick-start pipeline's code, not the include line."""
    html = (built_site / "get-started" / "index.html").read_text(encoding="utf-8")
    assert "start_pipeline" in html and "--8&lt;--" not in html and "--8<--" not in html


def test_pending_nav_entries_are_dropped_and_kept_ones_survive(tmp_path):
    hooks = load_hooks()
    (tmp_path / "here.md").write_text("# here\n")
    dropped: list[str] = []
    nav = [{"Home": "here.md"}, {"Later": [{"A": "missing.md"}]}, {"Mixed": [{"B": "here.md"}, {"C": "gone.md"}]}]
    assert hooks._prune(nav, tmp_path, dropped) == [{"Home": "here.md"}, {"Mixed": [{"B": "here.md"}]}]
    assert dropped == ["missing.md", "gone.md"]


def test_missing_results_file_shows_a_visible_warning_while_pending(tmp_path):
    hooks = load_hooks()
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "mkdocs.yml").write_text("")

    class File:
        src_path = "index.md"

    class Page:
        file = File()

    config = {"extra": {"allow_pending": True}, "docs_dir": str(docs), "config_file_path": str(tmp_path / "mkdocs.yml")}
    out = hooks.on_page_markdown('Numbers:\n\n--8<-- "docs/results/nope.md"\n', Page(), config, None)
    assert '!!! warning "Results not generated yet"' in out and "docs/results/nope.md" in out
    config["extra"]["allow_pending"] = False
    # Not pending: left to pymdownx.snippets, whose check_paths fails the build.
    assert hooks.on_page_markdown('--8<-- "docs/results/nope.md"\n', Page(), config, None).startswith("--8<--")


def test_every_page_has_a_title_and_description():
    """The convention the skill renderer and search rely on: frontmatter with a title and a one-sentence description."""
    from skillgen.markdown import RenderError, read_page

    problems = []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] == "results":
            continue
        try:
            read_page(ROOT, rel)
        except RenderError as exc:
            problems.append(str(exc))
    assert not problems, "\n".join(problems)
