"""The results plots read on the site's light and dark themes: each PNG is an opaque white card with a grey border,
and scripts/plots.py draws them again from their JSON alone."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from rtm_lab.benchmarks import figures
from rtm_lab.paths import PROJECT_ROOT

RESULTS = PROJECT_ROOT / "docs" / "results"
PLOTS = sorted(RESULTS.glob("*.png"))
EDGE = tuple(int(figures.EDGE[i : i + 2], 16) for i in (1, 3, 5))


def card_problems(path: Path) -> list[str]:
    """What keeps the PNG from being a card: a transparent pixel, or an outer pixel that is not the border's grey."""
    image = Image.open(path).convert("RGBA")
    width, height = image.size
    problems = []
    if image.getchannel("A").getextrema() != (255, 255):
        problems.append(f"{path.name}: has transparent pixels")
    outline = [(x, 0) for x in range(width)] + [(x, height - 1) for x in range(width)]
    outline += [(0, y) for y in range(height)] + [(width - 1, y) for y in range(height)]
    off = [xy for xy in outline if image.getpixel(xy)[:3] != EDGE]
    if off:
        problems.append(f"{path.name}: {len(off)} outer pixels are not the border's grey {EDGE}, e.g. {off[0]}")
    inside = image.getpixel((width // 2, 4))[:3]
    if inside != (255, 255, 255):
        problems.append(f"{path.name}: the card inside the border is {inside}, not white")
    return problems


def test_every_published_plot_is_an_opaque_card_with_a_border():
    assert len(PLOTS) >= 4, PLOTS
    problems = [problem for path in PLOTS for problem in card_problems(path)]
    assert not problems, "\n".join(problems) + "\nredraw them: python scripts/plots.py"


def test_plots_py_redraws_a_plot_from_its_json_alone(tmp_path):
    shutil.copy(RESULTS / "latency.json", tmp_path / "latency.json")
    done = subprocess.run(
        [sys.executable, "scripts/plots.py", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=PROJECT_ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {tmp_path / 'latency.png'}"
    assert card_problems(tmp_path / "latency.png") == []


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_plots_py_says_in_one_line_when_there_is_nothing_to_draw(folder, tmp_path):
    if folder == "empty":
        (tmp_path / folder).mkdir()
    done = subprocess.run(
        [sys.executable, "scripts/plots.py", "--results", str(tmp_path / folder)],
        capture_output=True,
        text=True,
        check=False,
        cwd=PROJECT_ROOT,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: "), done.stderr
