"""The concept diagrams, written as SVG by plain Python: the timeline of micro-batch and real-time mode, and the
task slots a real-time query holds. `scripts/tables.py` writes them into docs/diagrams/ and checks them in lint.

Committed files kept in step by `tables.py all --check`, not an mkdocs hook that draws at build time: the pages
include them like any generated table (pymdownx.snippets, `check_paths`), so the strict build runs no project code;
a change to a drawing shows in review as an SVG diff; the skill renderer and llms.txt read the same Markdown the site
does; and the one source of truth stays this code, since lint fails when a file and its drawing differ.
"""
