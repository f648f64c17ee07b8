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


def build_copy(tmp_path, allow_pending: bool):
    """Strict build of a copy of the site without its results tables; returns (exit code, log, site folder)."""
    import os
    import shutil
    import subprocess
    import sys

    import yaml

    for folder in ("docs", "snippets"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "docs_hooks.py", tmp_path / "scripts")
    config = (ROOT / "mkdocs.yml").read_text()
    assert "allow_pending: true" in config or "allow_pending: false" in config
    config = config.replace("allow_pending: true", f"allow_pending: {str(allow_pending).lower()}")
    config = config.replace("allow_pending: false", f"allow_pending: {str(allow_pending).lower()}")
    (tmp_path / "mkdocs.yml").write_text(config)
    assert yaml.safe_load(config)["extra"]["allow_pending"] is allow_pending
    (tmp_path / "docs" / "results").mkdir(exist_ok=True)
    for table in (tmp_path / "docs" / "results").glob("*.md"):
        table.unlink()
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    return result.returncode, result.stderr, tmp_path / "site"


def test_missing_results_file_is_a_visible_box_while_pending_and_a_build_error_after(tmp_path):
    code, log, site = build_copy(tmp_path / "pending", allow_pending=True)
    assert code == 0, log
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Results not generated yet" in home and "docs/results/sink.md" in home
    code, log, _ = build_copy(tmp_path / "final", allow_pending=False)
    assert code != 0 and "Snippet at path 'docs/results/" in log and "could not be found" in log, log[-3000:]
