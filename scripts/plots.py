#!/usr/bin/env python3
"""Draw the results plots under docs/results again from their JSON, without running a benchmark.

  python scripts/plots.py                 every plot whose JSON is there: latency, latency-sweep (and its CDF),
                                          engines and each placement's engines-*, engine-capacity-*, per-task-throughput
                                          and checkpoint-storage
  python scripts/plots.py --results DIR   the same from another results folder

Use it after a change to how the plots are drawn (rtm_lab.benchmarks.figures.save: an opaque white card with a grey border,
legible in the site's light and dark themes). The benchmarks draw their own plot when they run.
"""

import sys
from pathlib import Path

from rtm_lab import cli
from rtm_lab.benchmarks import replot
from rtm_lab.errors import LabError
from rtm_lab.paths import PROJECT_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser_from_doc("plots.py", __doc__)
    parser.add_argument("--results", type=Path, default=PROJECT_ROOT / "docs" / "results", help="the results folder")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        raise LabError(f"no results folder {args.results}")
    written = replot.redraw(args.results)
    if not written:
        raise LabError(f"no latency.json, latency-sweep.json or engines.json in {args.results}: nothing to draw")
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
