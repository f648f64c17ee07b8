"""Copy test: every page's code, as a reader copies it, runs outside this repository.

For each docs page and each skill file, the fenced code a reader sees is taken in page order, with `--8<--` includes
expanded by pymdownx.snippets itself (configured from mkdocs.yml, as the site does). All its Python blocks, joined,
make one program `page.py` in a fresh folder outside the repository. It runs there with a clean environment (no
PYTHONPATH, the folder as working directory) in one venv built per test run from the pip line of "Set up your own
project" in docs/get-started.md, with the Kafka connector set the way that section says (its `spark-defaults.conf`
in `SPARK_CONF_DIR`), and the lab's services in `KAFKA_BOOTSTRAP_SERVERS` / `POSTGRES_DSN`. It must exit 0, and
print every `text title="Prints"` block the page shows (lines in order; `...` matches anything).

Conventions on a page (all compatible with tests/docs/test_examples.py and the skill renderer):
- A Python block that is a fragment by design is marked `python {test="skip" reason="..."}` in docs; in skill files
  it is the renderer's note `*Not run by the tests: reason.*` right above the block. Fragments are counted, not run.
- A block of another language with `title="some/path"` is a file the reader saves: it is written to that path in the
  folder before anything runs (e.g. Java source a build recipe compiles).
- A shell block (`bash`/`sh`) that includes a `snippets/**/*.sh` file, or is marked `{copy="run"}`, is a build step:
  it runs in the folder, in page order, before the Python program (e.g. the JVM writer's `javac` + `jar` recipe).

Each page opts in or out explicitly in `PLAN` below; a page with code and no entry fails. The tally (pages, blocks
run, fragments, pages not run and why) is printed at the end of the run.
"""

import contextlib
import fnmatch
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SKILL = ROOT / "skills" / "spark-real-time-mode"
PAGES = sorted(
    [p for p in (ROOT / "docs").rglob("*.md") if "results" not in p.relative_to(ROOT / "docs").parts]
    + [SKILL / "SKILL.md", *sorted((SKILL / "references").glob("*.md"))]
)
SETUP_PAGE = ROOT / "docs" / "get-started.md"
SETUP_SECTION = "## Set up your own project"

RUN = "run"
# Every page with code says whether its code runs as one program outside the repository, or why not.
PLAN: dict[str, str] = {
    "docs/get-started.md": RUN,
    "docs/concepts.md": RUN,
    "docs/reference/setup.md": RUN,
    "docs/reference/support-matrix.md": RUN,
    "docs/reference/slot-sizing.md": RUN,
    "docs/reference/delivery-semantics.md": RUN,
    "docs/reference/transform-with-state.md": RUN,
    "docs/reference/latency-metrics.md": RUN,
    "docs/reference/kafka-tuning.md": RUN,
    "docs/reference/errors.md": RUN,
    "docs/guides/postgres-sink.md": RUN,
    "docs/guides/ad-attribution.md": RUN,
    "docs/guides/cluster.md": RUN,
    "docs/benchmarks/latency.md": RUN,
    "docs/troubleshooting.md": RUN,
    "docs/using-the-skill.md": RUN,
    "docs/index.md": RUN,
    "skills/spark-real-time-mode/SKILL.md": RUN,
    **{f"skills/spark-real-time-mode/references/{p.name}": RUN for p in (SKILL / "references").glob("*.md")},
}
PAGE_TIMEOUT_S = 900

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
SETTINGS = re.compile(r'(\w+)="([^"]*)"')
NOT_RUN_NOTE = re.compile(r"^\*Not run by the tests: (?P<reason>.*)\.\*$")
SHELL = {"bash", "sh", "shell", "console"}


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    language: str
    settings: dict[str, str]
    code: str  # includes expanded, dedented
    includes: list[str] = field(default_factory=list)  # the `--8<--` specs of the block, as written
    fragment_reason: str | None = None


@dataclass
class Page:
    path: Path
    blocks: list[Block] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))

    @property
    def python(self) -> list[Block]:
        return [b for b in self.blocks if b.language in {"python", "py"}]


def _snippet_preprocessor():
    """pymdownx.snippets configured from mkdocs.yml, exactly as the site expands `--8<--` lines."""
    import markdown

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    for extension in config["markdown_extensions"]:
        if isinstance(extension, dict) and "pymdownx.snippets" in extension:
            options = dict(extension["pymdownx.snippets"] or {})
            break
    else:
        raise AssertionError("mkdocs.yml has no pymdownx.snippets settings")
    options["base_path"] = [str(ROOT / p) for p in options.get("base_path", ["."])]
    md = markdown.Markdown(extensions=["pymdownx.snippets"], extension_configs={"pymdownx.snippets": options})
    return md.preprocessors["snippet"]


def parse_page(path: Path) -> Page:
    """The page's fenced blocks in order, includes expanded; fragments marked."""
    preprocessor = _snippet_preprocessor()
    lines = path.read_text(encoding="utf-8").splitlines()
    page = Page(path)
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        body, j = [], i + 1
        while j < len(lines) and lines[j].strip() != fence:
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        head = info.split("{", 1)[0].split()
        language = head[0].lower() if head else ""
        settings = dict(SETTINGS.findall(info))
        code = "\n".join(preprocessor.run(body)) if any("--8<--" in line for line in body) else "\n".join(body)
        includes = re.findall(r'--8<--\s+"([^"]+)"', "\n".join(body))
        block = Block(i + 1, language, settings, code, includes)
        if settings.get("test") == "skip":
            block.fragment_reason = settings.get("reason", "").strip() or "(no reason given)"
        else:
            before = [line.strip() for line in lines[max(0, i - 3) : i] if line.strip()]
            note = NOT_RUN_NOTE.match(before[-1]) if before else None
            if note:
                block.fragment_reason = note["reason"]
        page.blocks.append(block)
        i = j + 1
    return page


def setup_section() -> str:
    text = SETUP_PAGE.read_text(encoding="utf-8")
    assert SETUP_SECTION in text, f"{SETUP_PAGE.relative_to(ROOT)} has no '{SETUP_SECTION}' section"
    section = text.split(SETUP_SECTION, 1)[1]
    return section.split("\n## ", 1)[0]


def setup_from_page() -> tuple[list[str], str]:
    """(pip requirements, spark-defaults.conf text) exactly as "Set up your own project" shows them."""
    page = parse_page(SETUP_PAGE)
    section = setup_section()
    in_section = [b for b in page.blocks if b.code and b.code in section]
    pip = [m for b in in_section if b.language in SHELL for m in re.findall(r"pip install ([^\n]+)", b.code)]
    assert len(pip) == 1, f"expected one `pip install` line in '{SETUP_SECTION}', found {pip}"
    conf = [b.code for b in in_section if b.language == "properties"]
    assert len(conf) == 1, f"expected one `properties` block (spark-defaults.conf) in '{SETUP_SECTION}'"
    return pip[0].split(), conf[0]


@pytest.fixture(scope="session")
def reader_env(tmp_path_factory, lab) -> dict[str, str]:
    """One venv with only the page's pip packages, and the connector in a spark-defaults.conf, as a reader sets up."""
    requirements, spark_defaults = setup_from_page()
    home = tmp_path_factory.mktemp("reader")
    venv = home / "venv"
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", *requirements],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert pip.returncode == 0, f"pip install {' '.join(requirements)} failed:\n{pip.stderr[-3000:]}"
    conf = home / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(spark_defaults + "\n", encoding="utf-8")
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", str(home)),
        "LANG": "C.UTF-8",
        "VIRTUAL_ENV": str(venv),
        "SPARK_CONF_DIR": str(conf),
        "KAFKA_BOOTSTRAP_SERVERS": lab.kafka_bootstrap,
        "POSTGRES_DSN": lab.postgres_dsn,
    }
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


TALLY = pytest.StashKey[Counter]()
NOT_RUN = pytest.StashKey[dict]()
SILENT = pytest.StashKey[set]()


@pytest.fixture(scope="session")
def tally(request):
    """Counts over the run, printed once at the end: what ran, what was a fragment, what was not run and why."""
    counts = request.config.stash.setdefault(TALLY, Counter())
    not_run = request.config.stash.setdefault(NOT_RUN, {})
    yield counts, not_run
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    lines = [
        f"copy test: {counts['pages']} pages, {counts['pages_run']} run as programs ({counts['pages_passed']} passed), "
        f"{counts['blocks_run']} Python blocks run, {counts['fragments']} fragments by design, "
        f"{counts['build_steps']} build steps, {counts['files']} files saved, {counts['no_code']} pages without code",
        f"  of the pages that passed, {counts['output_checked']} printed what their Prints block shows; "
        f"{counts['pages_passed'] - counts['output_checked']} show no output (their code defines, then exits 0):",
        *(f"    no stated output: {page}" for page in sorted(request.config.stash.get(SILENT, set()))),
        *(f"  not run: {page}: {why}" for page, why in sorted(not_run.items())),
    ]
    # Session teardown output is captured like a test's; step outside the capture so the tally always shows.
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        for line in ["", *lines]:
            (reporter.write_line if reporter else print)(line)


def expected_output(page: Page) -> list[str]:
    return [
        line
        for b in page.blocks
        if b.language == "text" and b.settings.get("title") == "Prints"
        for line in b.code.splitlines()
        if line.strip()
    ]


def prints_in_order(stdout: str, expected: list[str]) -> str | None:
    """None when every expected line matches an output line, in order; else the first line that did not."""
    out = stdout.splitlines()
    position = 0
    for want in expected:
        pattern = want.strip().replace("*", "[*]").replace("...", "*")
        while position < len(out) and not fnmatch.fnmatchcase(out[position].strip(), pattern):
            position += 1
        if position == len(out):
            return want
        position += 1
    return None


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_code_runs_outside_the_repository(path: Path, reader_env, tally, tmp_path_factory, request):
    counts, not_run = tally
    page = parse_page(path)
    counts["pages"] += 1
    fragments = [b for b in page.python if b.fragment_reason]
    counts["fragments"] += len(fragments)
    runnable = [b for b in page.python if not b.fragment_reason]
    if not runnable:
        counts["no_code"] += 1
        return
    decision = PLAN.get(page.name)
    assert decision, (
        f"{page.name}: has Python code but no entry in PLAN in {Path(__file__).name}; add RUN, or the reason "
        "its code cannot run outside the repository"
    )
    if decision != RUN:
        not_run[page.name] = decision
        pytest.skip(f"{page.name}: {decision}")

    folder = tmp_path_factory.mktemp(path.stem)
    assert ROOT not in folder.parents
    for block in page.blocks:
        if block.language not in {"python", "py"} and block.settings.get("title", "Prints") != "Prints":
            target = folder / block.settings["title"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code + "\n", encoding="utf-8")
            counts["files"] += 1
    for block in page.blocks:
        included_script = any(spec.startswith("snippets/") and spec.endswith(".sh") for spec in block.includes)
        if block.language in SHELL and (block.settings.get("copy") == "run" or included_script):
            result = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", block.code],
                cwd=folder,
                env=reader_env,
                capture_output=True,
                text=True,
                timeout=PAGE_TIMEOUT_S,
            )
            assert result.returncode == 0, (
                f"{page.name}, build step at line {block.line} exited {result.returncode} in {folder}:\n"
                f"--- stderr (tail) ---\n{tail(result.stderr)}\n--- stdout (tail) ---\n{tail(result.stdout, 15)}"
            )
            counts["build_steps"] += 1

    program = folder / "page.py"
    starts = []  # (line in page.py, line on the page) of each block, to say which block failed
    text = ""
    for block in runnable:
        starts.append((text.count("\n") + 1, block.line))
        text += f"# --- {page.name}, block at line {block.line} ---\n{block.code}\n\n"
    program.write_text(text, encoding="utf-8")
    counts["pages_run"] += 1
    counts["blocks_run"] += len(runnable)
    result = subprocess.run(
        [reader_env["VIRTUAL_ENV"] + "/bin/python", program.name],
        cwd=folder,
        env=reader_env,
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT_S,
    )
    if result.returncode != 0:
        failing = re.findall(r'File "[^"]*page\.py", line (\d+)', result.stderr)
        where = ""
        if failing:
            line_no = int(failing[-1])
            page_line = max((b for b in starts if b[0] <= line_no), default=(0, 0))[1]
            where = f" (page.py line {line_no}, in the block at line {page_line} of the page)"
        pytest.fail(
            f"{page.name}: its code exited {result.returncode}{where}; program kept at {program}\n"
            f"--- stderr (tail) ---\n{tail(result.stderr)}\n--- stdout (tail) ---\n{tail(result.stdout, 15)}",
            pytrace=False,
        )
    expected = expected_output(page)
    missing = prints_in_order(result.stdout, expected)
    assert missing is None, (
        f"{page.name}: the page says its code prints {missing!r}, not found in order in its output:\n"
        f"{tail(result.stdout, 30)}"
    )
    counts["pages_passed"] += 1
    if expected:
        counts["output_checked"] += 1
    else:
        request.config.stash.setdefault(SILENT, set()).add(page.name)
