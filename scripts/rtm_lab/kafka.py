"""A real Apache Kafka broker: one KRaft node run from its Maven jars with `kafka.Kafka`, on loopback."""

import base64
import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from rtm_lab import jars, ports, processes
from rtm_lab.errors import LabError
from rtm_lab.java import check_java
from rtm_lab.paths import make_private_dir
from rtm_lab.signals import raise_if_received

GROUP = "kafka-broker"
READY_TIMEOUT_S = 120.0

SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={data_dir}
num.partitions=2
# A single node: every internal topic has one replica, and consumers need not wait for a rebalance.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=2
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=2
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=24
"""

LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    File:
      name: file
      fileName: "{log_file}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: info
      AppenderRef:
        ref: file
"""


@dataclass
class KafkaPaths:
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def config(self) -> Path:
        return self.root / "server.properties"

    @property
    def server_log(self) -> Path:
        return self.root / "server.log"

    @property
    def stdout_log(self) -> Path:
        return self.root / "stdout.log"


def answers(bootstrap: str, timeout_s: float = 5.0) -> bool:
    """True when the broker answers a metadata request."""
    try:
        return _answers(bootstrap, timeout_s)
    finally:
        raise_if_received()  # a Ctrl-C or SIGTERM that kafka-python's network loop swallowed


def _answers(bootstrap: str, timeout_s: float) -> bool:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    # A refused TCP connection answers at once; the Kafka client would retry it for its whole timeout.
    if not any(_accepts(server.strip()) for server in bootstrap.split(",")):
        return False
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            request_timeout_ms=int(timeout_s * 1000),
            # The client's default waits 30 s for a listener that accepts connections but never speaks Kafka.
            bootstrap_timeout_ms=int(timeout_s * 1000),
            client_id="rtm-lab-probe",
        )
    except (KafkaError, OSError, ValueError):
        return False
    try:
        admin.describe_cluster()
        return True
    except (KafkaError, OSError):
        return False
    finally:
        admin.close()


def _accepts(server: str) -> bool:
    host, _, port = server.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=3):
            return True
    except (OSError, ValueError):
        return False


def classpath() -> str:
    return os.pathsep.join(str(p) for p in jars.ensure(GROUP))


def marker(root: Path) -> str:
    """What the broker's command line holds and no other process's does: its config file's path in the lab folder."""
    return str(KafkaPaths(root).config)


def configured_port(root: Path) -> int | None:
    """The broker port in the lab's config file (to find a running broker when the state file lost it)."""
    try:
        for line in KafkaPaths(root).config.read_text().splitlines():
            if line.startswith("advertised.listeners="):
                return int(line.rsplit(":", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def start(root: Path, port: int, controller_port: int, on_spawn=None) -> int:
    """Format storage if needed, start the broker, wait until it answers; return its pid.

    `on_spawn(pid)` is called as soon as the broker process exists, so a caller can record it before waiting.
    """
    java, _ = check_java()
    paths = KafkaPaths(root)
    make_private_dir(root)
    jar_path = classpath()
    wanted = SERVER_PROPERTIES.format(port=port, controller_port=controller_port, data_dir=paths.data)
    # The metadata log remembers the controller address, so a changed port means fresh storage.
    if paths.config.exists() and paths.config.read_text() != wanted:
        shutil.rmtree(paths.data, ignore_errors=True)
    paths.config.write_text(wanted)
    log4j = root / "log4j2.yaml"
    log4j.write_text(LOG4J2.format(log_file=paths.server_log))
    if not (paths.data / "meta.properties").exists():
        shutil.rmtree(paths.data, ignore_errors=True)
        format_storage(java, jar_path, paths.config, cluster_id())
    heap = os.environ.get("RTM_KAFKA_HEAP", "768m")
    cmd = [
        java,
        f"-Xmx{heap}",
        "-Xms256m",
        "-XX:+UseG1GC",
        "-XX:-UsePerfData",  # no /tmp/hsperfdata_<user> left behind
        f"-Dlog4j2.configurationFile={log4j}",
        "-Djava.awt.headless=true",
        "-cp",
        jar_path,
        "kafka.Kafka",
        str(paths.config),
    ]
    pid = processes.spawn(cmd, paths.stdout_log)
    if on_spawn is not None:
        on_spawn(pid)
    bootstrap = f"{ports.HOST}:{port}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if not processes.is_alive(pid):
            raise LabError(
                f"The Kafka broker exited during start-up. Last lines of {paths.server_log}:\n"
                f"{processes.tail(paths.server_log)}\n{processes.tail(paths.stdout_log, 10)}"
            )
        if answers(bootstrap, timeout_s=2.0):
            return pid
        time.sleep(0.3)
    processes.stop(pid)
    raise LabError(
        f"The Kafka broker did not answer on {bootstrap} within {READY_TIMEOUT_S:.0f}s. "
        f"Last lines of {paths.server_log}:\n{processes.tail(paths.server_log)}"
    )


def cluster_id(draw=uuid.uuid4) -> str:
    """A cluster id as Kafka's `random-uuid` prints it: a UUID in URL-safe base64, 22 characters.

    One id in 64 would start with `-`; Kafka's own `Uuid.randomUuid()` draws again in that case, since a command
    line parser reads such a string as an option. So do we.
    """
    while True:
        encoded = base64.urlsafe_b64encode(draw().bytes).decode().rstrip("=")
        if not encoded.startswith("-"):
            return encoded


def format_storage(java: str, classpath: str, config: Path, cluster: str) -> None:
    """Format the KRaft storage named in `config` with the id `cluster`.

    `--cluster-id=<id>` keeps the id one token, so even an id that starts with `-` is never read as an option.
    """
    tool = [java, "-XX:-UsePerfData", "-cp", classpath, "kafka.tools.StorageTool"]
    fmt = subprocess.run(
        [*tool, "format", f"--cluster-id={cluster}", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if fmt.returncode != 0:
        raise LabError(f"Formatting Kafka storage failed:\n{fmt.stdout[-2000:]}{fmt.stderr[-2000:]}")
