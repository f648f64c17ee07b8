"""The site builds with `mkdocs build --strict` (broken links, missing includes and nav problems fail it)."""

from rtm_lab.paths import PROJECT_ROOT

# Folders of docs/ whose Markdown other pages include (mkdocs.yml's exclude_docs): never pages themselves.
NOT_PAGES = ("results", "includes", "drafts")


def test_strict_build_renders_every_page(built_site):
    pages = sorted(p.relative_to(PROJECT_ROOT / "docs") for p in (PROJECT_ROOT / "docs").rglob("*.md"))
    pages = [p for p in pages if p.parts[0] not in NOT_PAGES]
    assert pages, "docs/ has no pages"
    for page in pages:
        html = built_site / ("index.html" if page.name == "index.md" else page.with_suffix("") / "index.html")
        assert html.is_file(), f"{page} was not built into {html.relative_to(built_site)}"
    assert (built_site / "search" / "search_index.json").is_file()


def test_llms_txt_lists_every_page_and_llms_full_holds_them(built_site):
    """/llms.txt links every page (by its Markdown address) and /llms-full.txt carries each page's title."""
    from rtm_lab.skillgen.markdown import read_page

    index = (built_site / "llms.txt").read_text(encoding="utf-8")
    full = (built_site / "llms-full.txt").read_text(encoding="utf-8")
    pages = [
        p
        for p in sorted((PROJECT_ROOT / "docs").rglob("*.md"))
        if p.relative_to(PROJECT_ROOT / "docs").parts[0] not in NOT_PAGES
    ]
    missing = []
    for path in pages:
        rel = path.relative_to(PROJECT_ROOT / "docs")
        address = (
            "index.md"
            if rel.name == "index.md" and len(rel.parts) == 1
            else rel.with_suffix("").as_posix() + "/index.md"
        )
        if f"/{address})" not in index and f"/{rel.as_posix()})" not in index:
            missing.append(str(rel))
        title = read_page(PROJECT_ROOT, path.relative_to(PROJECT_ROOT)).title
        assert title in full, f"{rel}: its title {title!r} is not in llms-full.txt"
    assert not missing, f"pages not listed in llms.txt: {missing}\n{index}"


def test_snippet_code_reaches_the_page(built_site):
    """The get-started page shows the quick-start pipeline's code, not the include line."""
    html = (built_site / "get-started" / "index.html").read_text(encoding="utf-8")
    assert "start_pipeline" in html and "--8&lt;--" not in html and "--8<--" not in html


def test_every_page_has_a_title_and_description():
    """The convention the skill renderer and search rely on: frontmatter with a title and a one-sentence description."""
    from rtm_lab.skillgen.markdown import RenderError, read_page

    problems = []
    for path in sorted((PROJECT_ROOT / "docs").rglob("*.md")):
        rel = path.relative_to(PROJECT_ROOT)
        if rel.parts[1] in NOT_PAGES:
            continue
        try:
            read_page(PROJECT_ROOT, rel)
        except RenderError as exc:
            problems.append(str(exc))
    assert not problems, "\n".join(problems)


def test_missing_results_file_fails_the_strict_build(tmp_path):
    """A page that includes a results table nobody generated does not build (pymdownx.snippets' check_paths)."""
    import os
    import shutil
    import subprocess
    import sys

    for folder in ("docs", "snippets"):
        shutil.copytree(PROJECT_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PROJECT_ROOT / "mkdocs.yml", tmp_path)
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
    assert result.returncode != 0, result.stderr[-3000:]
    assert "Snippet at path 'docs/results/" in result.stderr and "could not be found" in result.stderr
