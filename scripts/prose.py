#!/usr/bin/env python3
"""Check the docs' prose: sentence lengths and parentheses against a ratchet, collapsed blocks, and one name per concept.

  python scripts/prose.py check              every check below (`make lint` runs it); exit 1 naming each failure
  python scripts/prose.py check --targets    also fail when one of the twelve main pages misses the house targets
  python scripts/prose.py figures            the prose figures only: no page worse than its ratchet entry,
                                             collapsed blocks hold evidence only and at most 25 % of a page's words
  python scripts/prose.py terms              the term check only: no retired name (scripts/rtm_lab/glossary.yml)
                                             in a page, no "recommended" next to the batch duration anywhere
  python scripts/prose.py report [--markdown] [PAGE ...]   a table of each page's figures, recorded and now
  python scripts/prose.py ratchet            record today's figures where they are better (it only tightens)
  python scripts/prose.py ratchet --reset PAGE ...         record PAGE's figures as they are now, better or worse
  python scripts/prose.py sentences PAGE     a page's sentences, longest first, with their word counts

PAGE is a path under docs/, e.g. reference/slot-sizing.md. The counting rules are in scripts/rtm_lab/prose.py's
docstring; the targets: mean <= 18 words per sentence, p90 <= 33, <= 3 % of sentences over 40 words, <= 1.5 opening
parentheses per 100 words.
"""

import sys
from typing import TextIO

from rtm_lab import cli, prose, terms
from rtm_lab.errors import LabError


def _pages(names: list[str]) -> list[str]:
    known = prose.pages()
    for name in names:
        if name not in known:
            raise LabError(f"no page {name!r} under docs/ (pages: {', '.join(known)})")
    return names or known


def check_figures(targets: bool) -> int:
    recorded = prose.load_ratchet()
    failed = 0
    for page in prose.pages():
        figures = prose.measure(page)
        problems = prose.worse_figures(figures, recorded)
        if targets and page in prose.MAIN_PAGES:
            problems += [f"misses the target: {miss}" for miss in prose.missed_targets(figures)]
        problems += figures.collapsed_problems
        if problems:
            failed = 1
            print(f"{page}:", file=sys.stderr)
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
            if any("limit" in problem or "target" in problem for problem in problems):
                print("  its longest sentences:", file=sys.stderr)
                _show_worst(figures, sys.stderr)
    gone = sorted(set(recorded) - set(prose.pages()))
    if gone:
        print(f"the ratchet names pages that are gone: {', '.join(gone)} (run `scripts/prose.py ratchet`)")
    if failed:
        print(
            "Shorten those sentences (one idea each), or take brackets out. A page may not get worse than its record "
            f"in {prose.RATCHET.relative_to(prose.PROJECT_ROOT)}; recording a worse figure "
            "(`scripts/prose.py ratchet --reset PAGE`) is the lead's call.",
            file=sys.stderr,
        )
    else:
        print(f"prose figures: {len(prose.pages())} pages, none worse than recorded in {prose.RATCHET.name}")
    return failed


def _show_worst(figures: prose.PageFigures, stream: TextIO, count: int = 3) -> None:
    for words, sentence in figures.longest[:count]:
        print(f"    {words} words: {sentence[:240]}{'…' if len(sentence) > 240 else ''}", file=stream)


def check_terms() -> int:
    hits = terms.check()
    for hit in hits:
        print(hit, file=sys.stderr)
    if hits:
        print(f"{len(hits)} term problems: see scripts/rtm_lab/glossary.yml and docs/glossary.md", file=sys.stderr)
        return 1
    print("terms: no retired name, no recommended batch duration")
    return 0


def report(names: list[str], markdown: bool) -> int:
    recorded = prose.load_ratchet()
    header = ["page", "words", "sentences", "mean", "p90", "% > 40", "( per 100", "collapsed %", "targets"]
    rows = []
    for page in _pages(names):
        figures = prose.measure(page)
        values = figures.figures()
        was = recorded.get(page, {})

        def cell(key: str, values: dict[str, float] = values, was: dict[str, float] = was) -> str:
            now = f"{values[key]:.1f}"
            return now if key not in was or round(was[key], 1) == round(values[key], 1) else f"{now} ({was[key]:.1f})"

        mark = "met" if not prose.missed_targets(figures) else ("main: missed" if page in prose.MAIN_PAGES else "-")
        counts = [page, str(figures.words), str(figures.sentences)]
        ratios = [cell("mean"), cell("p90"), cell("over_40_pct"), cell("parens_per_100")]
        rows.append([*counts, *ratios, f"{figures.collapsed_share:.0f}", mark])
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" if i == 0 else "--:" for i in range(len(header))) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print(
                "  ".join(value.ljust(widths[i]) if i == 0 else value.rjust(widths[i]) for i, value in enumerate(row))
            )
        print("(figures now; the recorded figure in brackets where it differs)")
    return 0


def ratchet(reset: list[str] | None) -> int:
    recorded = prose.load_ratchet()
    current = [prose.measure(page) for page in prose.pages()]
    if reset is not None:
        for page in _pages(reset):
            recorded.pop(page, None)
    pages = prose.tightened(recorded, current)
    prose.save_ratchet(pages)
    print(f"wrote {prose.RATCHET} ({len(pages)} pages)")
    return 0


def sentences(page: str) -> int:
    (page,) = _pages([page])
    figures = prose.measure(page)
    rendered = prose.render(page)
    pairs = []
    for unit in rendered.units:
        if unit.is_prose and not unit.collapsed:
            shown = prose.sentences(unit.text, keep_code=True)
            pairs += [(prose.word_count(s), text) for s, text in zip(prose.sentences(unit.text), shown, strict=True)]
    lengths = sorted(pairs, key=lambda pair: -pair[0])
    for words, sentence in lengths:
        print(f"{words:4}  {sentence}")
    print(f"{figures.sentences} sentences, {figures.words} words")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser_from_doc("prose.py", __doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=cli.Parser)
    check = commands.add_parser("check", help="every check (make lint)")
    check.add_argument("--targets", action="store_true", help="also fail when a main page misses the targets")
    commands.add_parser("figures", help="the prose figures against the ratchet, and collapsed blocks")
    commands.add_parser("terms", help="retired names and 'recommended' next to the batch duration")
    report_parser = commands.add_parser("report", help="a table of each page's figures")
    report_parser.add_argument("pages", nargs="*", metavar="PAGE")
    report_parser.add_argument("--markdown", action="store_true", help="as a Markdown table")
    ratchet_parser = commands.add_parser("ratchet", help="record today's figures where they are better")
    ratchet_parser.add_argument("--reset", nargs="+", metavar="PAGE", help="record these pages as they are now")
    sentences_parser = commands.add_parser("sentences", help="a page's sentences, longest first")
    sentences_parser.add_argument("page", metavar="PAGE")
    args = parser.parse_args(argv)

    def run() -> int:
        if args.command == "check":
            return check_figures(args.targets) | check_terms()
        if args.command == "figures":
            return check_figures(False)
        if args.command == "terms":
            return check_terms()
        if args.command == "report":
            return report(args.pages, args.markdown)
        if args.command == "ratchet":
            return ratchet(args.reset)
        return sentences(args.page)

    return cli.run(run)


if __name__ == "__main__":
    sys.exit(main())
