"""mkdocs hooks: let the site build strictly while pages and benchmark results are still arriving.

With `extra.allow_pending: true` in mkdocs.yml:
- a nav entry whose page does not exist yet is dropped (and logged), so the planned nav can be written up front;
- a results include (`--8<-- "docs/results/x.md"`) or results image whose file does not exist yet is replaced by a
  visible warning box on the page that names the missing file and the command that writes it;
- a link to a page that does not exist yet becomes its plain text (and is logged).
With `allow_pending: false` both are left alone, so mkdocs' own checks fail the strict build on a missing page, and
pymdownx.snippets (check_paths) fails it on a missing results file.
"""

import logging
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.rtm")

RESULTS_INCLUDE = re.compile(r'^(?P<indent>[ \t]*)--8<--[ \t]+"(?P<path>docs/results/[^"]+)"[ \t]*$', re.M)
PAGE_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s#]+\.md)(?:#[^)\s]*)?\)")
RESULTS_IMAGE = re.compile(r"^(?P<indent>[ \t]*)!\[[^\]]*\]\((?P<path>(?:\.\./)*results/[^)\s]+)\)[ \t]*$", re.M)
PENDING_NOTE = (
    '{indent}!!! warning "Results not generated yet"\n'
    "{indent}    `{path}` does not exist yet. It is written by the benchmark, never by hand: run the benchmark "
    "command named on [the benchmarks page]({benchmarks}) and rebuild.\n"
)


def _allow_pending(config) -> bool:
    return bool(config.get("extra", {}).get("allow_pending", False))


def _prune(items, docs_dir: Path, dropped: list[str]):
    """Return the nav without entries whose Markdown file is missing, and without sections left empty."""
    kept = []
    for item in items:
        if isinstance(item, dict):
            (title, value), *_ = item.items()
            if isinstance(value, list):
                children = _prune(value, docs_dir, dropped)
                if children:
                    kept.append({title: children})
                continue
            if isinstance(value, str) and value.endswith(".md") and not (docs_dir / value).is_file():
                dropped.append(value)
                continue
        elif isinstance(item, str) and item.endswith(".md") and not (docs_dir / item).is_file():
            dropped.append(item)
            continue
        kept.append(item)
    return kept


def on_config(config):
    if not _allow_pending(config) or not config.get("nav"):
        return config
    dropped: list[str] = []
    config["nav"] = _prune(config["nav"], Path(config["docs_dir"]), dropped)
    if dropped:
        log.info("allow_pending: nav entries without a page yet: %s", ", ".join(dropped))
    return config


def on_page_markdown(markdown: str, page, config, files):
    if not _allow_pending(config):
        return markdown
    docs_dir = Path(config["docs_dir"])
    repo_root = Path(config["config_file_path"]).parent
    page_dir = (docs_dir / page.file.src_path).parent
    depth = len(Path(page.file.src_path).parent.parts)
    benchmarks = "../" * depth + "benchmarks/latency.md"
    if not (docs_dir / "benchmarks" / "latency.md").is_file():
        benchmarks = "../" * depth + "index.md"

    def include(match: re.Match) -> str:
        if (repo_root / match["path"]).is_file():
            return match[0]
        log.info("allow_pending: %s includes missing %s", page.file.src_path, match["path"])
        return PENDING_NOTE.format(indent=match["indent"], path=match["path"], benchmarks=benchmarks)

    def image(match: re.Match) -> str:
        if (page_dir / match["path"]).is_file():
            return match[0]
        shown = "docs/" + (page_dir / match["path"]).resolve().relative_to(docs_dir.resolve()).as_posix()
        log.info("allow_pending: %s shows missing %s", page.file.src_path, shown)
        return PENDING_NOTE.format(indent=match["indent"], path=shown, benchmarks=benchmarks)

    def link(match: re.Match) -> str:
        if "://" in match["target"] or (page_dir / match["target"]).is_file():
            return match[0]
        log.info("allow_pending: %s links to missing %s", page.file.src_path, match["target"])
        return match["text"]

    markdown = RESULTS_IMAGE.sub(image, RESULTS_INCLUDE.sub(include, markdown))
    return PAGE_LINK.sub(link, markdown)
