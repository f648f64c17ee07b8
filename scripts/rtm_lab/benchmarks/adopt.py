"""Bring a results file measured into a scratch folder into docs/results (`bench.py adopt`).

A long benchmark often writes to a scratch `--json` (and `--artefacts`) so that a half-made file never sits in the
site. Once it is complete, this moves it, and its artefacts folder, to docs/results under the name its page includes,
and rewrites every command it recorded into the one a reader would type: `--json` and `--artefacts` point at the new
places, and `--until` (when that session had to stop) is dropped. The runs' own figures are not touched. Run it on a
file already in docs/results to clean the commands it recorded in place. Then `python scripts/tables.py NAME`.

    python scripts/bench.py adopt /tmp/scratch/dedup-stall-watch.json
"""

import argparse
import json
import shlex
import shutil
import sys
from pathlib import Path

from rtm_lab.benchmarks import engines
from rtm_lab.paths import PROJECT_ROOT

RESULTS = PROJECT_ROOT / "docs" / "results"
DROPPED = {"--until"}  # options that said when a session had to stop, not how to measure


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", type=Path, help="the results file to bring in (its .md and plots are regenerated)")
    parser.add_argument("--name", help="its name in docs/results (default: the source's file name)")
    parser.add_argument(
        "--artefacts", type=Path, help="the run folders the benchmark kept beside it (default: what the runs name)"
    )


def published_command(command: str, json_to: str, artefacts_to: str | None) -> str:
    """`command` with `--json` and `--artefacts` pointing at their published places and `--until` dropped."""
    words, out = shlex.split(command), []
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, value = word.partition("=")
        takes = name in DROPPED or name in ("--json", "--artefacts")
        if takes and not eq:
            value = words[i + 1] if i + 1 < len(words) else ""
            i += 1
        i += 1
        if name in DROPPED:
            continue
        if name == "--json":
            out += ["--json", json_to]
        elif name == "--artefacts":
            out += ["--artefacts", artefacts_to or value]
        else:
            out.append(word)
    return shlex.join(out)


def _rewrite(node, json_to: str, artefacts_from: str | None, artefacts_to: str | None):
    """Every "command" string rewritten, and every "artefacts" path moved, anywhere in the results."""
    if isinstance(node, dict):
        got = {}
        for key, value in node.items():
            if key == "command" and isinstance(value, str):
                got[key] = published_command(value, json_to, artefacts_to)
            elif key == "artefacts" and isinstance(value, str) and artefacts_from and artefacts_to:
                got[key] = value.replace(artefacts_from, artefacts_to, 1)
            else:
                got[key] = _rewrite(value, json_to, artefacts_from, artefacts_to)
        return got
    if isinstance(node, list):
        return [_rewrite(v, json_to, artefacts_from, artefacts_to) for v in node]
    return node


def _artefacts_of(result: dict) -> str | None:
    """The folder the runs kept their artefacts under (the parent of each run's folder), if they name one."""
    runs = result.get("runs", {})
    rows = runs.values() if isinstance(runs, dict) else runs
    parents = {str(Path(r["artefacts"]).parent) for r in rows if isinstance(r, dict) and r.get("artefacts")}
    if len(parents) > 1:
        raise ValueError(f"the runs keep artefacts in {len(parents)} folders: {', '.join(sorted(parents))}")
    return parents.pop() if parents else None


def adopt(source: Path, name: str, artefacts: Path | None, results: Path = RESULTS) -> Path:
    """Move `source` (and `artefacts`) into `results` as `name`, commands rewritten; returns the new path."""
    result = json.loads(source.read_text())
    dest = results / name
    recorded = _artefacts_of(result)
    artefacts_from = artefacts or (Path(recorded) if recorded else None)
    artefacts_to = results / (Path(name).stem + "-runs") if artefacts_from else None

    def shown(path: Path) -> str:
        return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)

    rewritten = _rewrite(
        result,
        shown(dest),
        recorded,
        shown(artefacts_to) if artefacts_to else None,
    )
    if artefacts_from and artefacts_to and artefacts_from.resolve() != artefacts_to.resolve():
        found = artefacts_from if artefacts_from.is_absolute() else PROJECT_ROOT / artefacts_from
        if found.is_dir():
            if artefacts_to.exists():
                raise ValueError(f"{shown(artefacts_to)} exists already; move it away first")
            shutil.copytree(found, artefacts_to)
    engines.save(rewritten, dest)  # through a temporary file, as every benchmark writes its results
    return dest


def main(args: argparse.Namespace, command: str) -> int:
    if not args.source.is_file():
        print(f"error: {args.source} is not a file", file=sys.stderr)
        return 2
    try:
        dest = adopt(args.source, args.name or args.source.name, args.artefacts)
    except (ValueError, json.JSONDecodeError) as exc:
        print(f"error: {args.source}: {exc}", file=sys.stderr)
        return 2
    kept = "" if dest.resolve() == args.source.resolve() else " (the source is left where it was)"
    print(f"wrote {dest}{kept}; now `python scripts/tables.py {dest.stem}`")
    return 0
