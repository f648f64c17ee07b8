"""A Prometheus server for the lab: loopback only, a free port, every file under `<lab>/prometheus/`.

The binaries come from Debian's `prometheus` package, downloaded with `apt-get download` and unpacked with `dpkg -x`
into `<lab>/prometheus-dist/`: installing the package would start a system service listening on all interfaces
(:9090), which this lab never leaves behind. `RTM_PROMETHEUS_BIN` (a folder holding `prometheus` and `promtool`), or
both on PATH, are used instead when set or found.

What it scrapes and which rules it evaluates are files the caller writes under the server's folder: targets in
`targets/*.json` (file service discovery, re-read within a second), rules in `rules/*.yml` (loaded on `reload()`).
Scrapes and rule evaluations run every second, the live tests' pace.
"""

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from rtm_lab import ports, processes
from rtm_lab.errors import LabError
from rtm_lab.paths import make_private_dir, state_dir, write_private
from rtm_lab.versions import PROMETHEUS_DEBIAN_PACKAGE, PROMETHEUS_VERSION
from rtm_lab.waiting import WaitTimeout, wait_until

BIN_ENV = "RTM_PROMETHEUS_BIN"
SCRAPE_INTERVAL = "1s"


def root() -> Path:
    return state_dir() / "prometheus"


def _dist() -> Path:
    return state_dir() / "prometheus-dist"


def find_bin_dir() -> Path | None:
    """The folder holding `prometheus` and `promtool`: RTM_PROMETHEUS_BIN, the unpacked package, or PATH."""
    explicit = os.environ.get(BIN_ENV)
    candidates = [Path(explicit)] if explicit else [_dist() / "usr" / "bin"]
    on_path = shutil.which("prometheus")
    if not explicit and on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if (folder / "prometheus").is_file() and (folder / "promtool").is_file():
            return folder
    return None


def promtool() -> Path:
    folder = find_bin_dir() or ensure_binaries()
    return folder / "promtool"


def ensure_binaries(log=print) -> Path:
    """The binaries' folder, unpacking Debian's package into the lab folder when they are missing."""
    found = find_bin_dir()
    if found:
        return found
    if os.environ.get(BIN_ENV):
        raise LabError(
            f"{BIN_ENV}={os.environ[BIN_ENV]} does not hold `prometheus` and `promtool`. Point it at the folder that "
            f"does, or unset it to let the lab unpack Debian's `{PROMETHEUS_DEBIAN_PACKAGE}` package."
        )
    if not (shutil.which("apt-get") and shutil.which("dpkg")):
        raise LabError(
            f"Prometheus {PROMETHEUS_VERSION} (`prometheus` and `promtool`) was not found and this machine has no "
            f"apt-get/dpkg to fetch Debian's package. Install Prometheus (macOS: `brew install prometheus`) and set "
            f"{BIN_ENV} to the folder holding both binaries."
        )
    log(f"prometheus unpacking Debian's {PROMETHEUS_DEBIAN_PACKAGE} package into {_dist()} ...")
    with tempfile.TemporaryDirectory(prefix="rtm-prometheus-deb-") as temp:
        # `_apt` must be able to write the download folder when apt-get runs as root.
        os.chmod(temp, 0o755)
        download = ["apt-get", "download", "-q", PROMETHEUS_DEBIAN_PACKAGE]
        result = subprocess.run(download, cwd=temp, capture_output=True, text=True)
        if result.returncode != 0 and os.geteuid() == 0:
            # A fresh machine has no package lists yet.
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True)
            result = subprocess.run(download, cwd=temp, capture_output=True, text=True)
        debs = list(Path(temp).glob(f"{PROMETHEUS_DEBIAN_PACKAGE}_*.deb"))
        if result.returncode != 0 or not debs:
            raise LabError(
                f"`apt-get download {PROMETHEUS_DEBIAN_PACKAGE}` failed ({result.stderr.strip()[-300:]}). Run "
                f"`apt-get update` as root, or install Prometheus and set {BIN_ENV} to the folder holding "
                f"`prometheus` and `promtool`."
            )
        shutil.rmtree(_dist(), ignore_errors=True)
        make_private_dir(_dist())
        unpack = subprocess.run(["dpkg", "-x", str(debs[0]), str(_dist())], capture_output=True, text=True)
        if unpack.returncode != 0:
            raise LabError(f"`dpkg -x {debs[0].name}` failed: {unpack.stderr.strip()[-300:]}")
    found = find_bin_dir()
    if not found:
        raise LabError(f"Debian's {PROMETHEUS_DEBIAN_PACKAGE} package held no usr/bin/prometheus and promtool")
    return found


def config_path() -> Path:
    return root() / "prometheus.yml"


def marker() -> str:
    """The argument that marks the lab's server (a whole argument holding this lab folder's path)."""
    return f"--config.file={config_path()}"


def url(port: int) -> str:
    return f"http://{ports.HOST}:{port}"


def log_path() -> Path:
    return root() / "prometheus.log"


def _config() -> str:
    return json.dumps(  # JSON is YAML: no YAML writer needed
        {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "rule_files": [str(root() / "rules" / "*.yml")],
            "scrape_configs": [
                {
                    "job_name": "rtm",
                    "file_sd_configs": [{"files": [str(root() / "targets" / "*.json")], "refresh_interval": "1s"}],
                }
            ],
        },
        indent=2,
    )


def start(port: int, on_spawn) -> int:
    """Start the server on 127.0.0.1:port and wait until it is ready; `on_spawn(pid)` records it at once."""
    binaries = ensure_binaries()
    for folder in (root(), root() / "rules", root() / "targets", root() / "data"):
        make_private_dir(folder)
    write_private(config_path(), _config())
    cmd = [
        str(binaries / "prometheus"),
        marker(),
        f"--storage.tsdb.path={root() / 'data'}",
        f"--web.listen-address={ports.HOST}:{port}",
        "--web.enable-lifecycle",  # POST /-/reload loads new rule files (loopback only)
        "--storage.tsdb.retention.time=1d",
    ]
    pid = processes.spawn(cmd, log_path(), cwd=root())
    on_spawn(pid)
    try:
        wait_until(lambda: answers(port) or not processes.is_alive(pid), 60, "Prometheus to be ready", 0.3)
    except WaitTimeout:
        raise LabError(f"Prometheus (pid {pid}) did not answer within 60 s; see {log_path()}") from None
    if not processes.is_alive(pid):
        raise LabError(f"Prometheus exited at start-up:\n{processes.tail(log_path(), 15)}")
    return pid


def answers(port: int | None) -> bool:
    if not port:
        return False
    try:
        with urllib.request.urlopen(f"{url(port)}/-/ready", timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def configured_port() -> int | None:
    """The port the running server was started with, read from its own command line."""
    for pid in processes.find(marker()):
        for arg in processes.arguments(pid):
            if arg.startswith("--web.listen-address="):
                return int(arg.rsplit(":", 1)[1])
    return None


def set_targets(name: str, addresses: list[str], labels: dict[str, str] | None = None) -> Path:
    """Scrape these host:port addresses (file service discovery picks the file up within a second or two)."""
    path = root() / "targets" / f"{name}.json"
    write_private(path, json.dumps([{"targets": addresses, "labels": labels or {}}]))
    return path


def remove_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def reload(port: int) -> None:
    """Re-read the configuration and rule files (a rule file with an error makes this raise)."""
    request = urllib.request.Request(f"{url(port)}/-/reload", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10):
            pass
    except urllib.error.HTTPError as error:
        raise LabError(f"Prometheus refused the reload: {error.read().decode(errors='replace').strip()}") from None


def api(port: int, path: str, **params: str) -> dict:
    """GET /api/v1/<path> and return its `data` (raises on an error answer)."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{url(port)}/api/v1/{path}{query}", timeout=10) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise LabError(f"Prometheus answered {path} with {body}")
    return body["data"]


def query(port: int, promql: str) -> list[dict]:
    """An instant query's result vector."""
    return api(port, "query", query=promql)["result"]


def stop(pid: int | None, started: str) -> bool:
    return processes.stop(pid, started, marker=marker())
