"""Nothing the lab or a test run starts listens beyond loopback: Kafka, PostgreSQL, Prometheus (`up --with
prometheus`), the object store (`up --with s3`), the Spark driver (RPC, block manager, UI) in this process and in a child that builds its own session."""

import ipaddress
import os
import subprocess
import sys

import psutil
import pytest

from rtm_lab import lab as lab_module
from rtm_lab.paths import PROJECT_ROOT

CHILD_SESSION = """
from rtm_lab.spark import spark_session

spark = spark_session("loopback-child", conf={"spark.ui.enabled": "true"})
print("UI", spark.sparkContext.uiWebUrl, flush=True)
input()
"""


def listening(pids) -> list[tuple[int, str, str, int]]:
    """(pid, name, address, port) of every listening TCP socket of these processes and all their descendants."""
    procs = {}
    for pid in pids:
        root = psutil.Process(pid)
        for proc in (root, *root.children(recursive=True)):
            procs[proc.pid] = proc
    found = []
    for proc in procs.values():
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        for conn in conns:
            if conn.status == psutil.CONN_LISTEN:
                found.append((proc.pid, proc.name(), conn.laddr.ip, conn.laddr.port))
    return found


def on_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback)


def test_the_lab_and_the_test_session_listen_on_loopback_only(lab, spark):
    # The lab as it runs now, not the fixture's snapshot: the kill tests restart the broker under a new pid.
    now = lab_module.status()
    services = (now.kafka, now.postgres, now.prometheus)
    pids = [os.getpid(), *(s.pid for s in services if s.pid and not s.external)]
    sockets = listening(pids)
    names = {name for _, name, _, _ in sockets}
    assert {"java", "postgres"} <= names, sockets  # the broker and the Spark JVM both listen, and are seen
    assert [s for s in sockets if not on_loopback(s[2])] == [], sockets


def test_the_labs_prometheus_listens_on_loopback_only(lab):
    state, started = lab_module.up(log=print, with_services={"prometheus"})
    try:
        sockets = listening([state.prometheus.pid])
        assert {name for _, name, _, _ in sockets} == {"prometheus"}, sockets
        assert state.prometheus.port in {port for *_, port in sockets}, sockets
        assert [s for s in sockets if not on_loopback(s[2])] == [], sockets
    finally:
        if started:
            lab_module.down(only=started, log=print)


def test_the_labs_object_store_listens_on_loopback_only(s3_store):
    store = lab_module.status().s3
    sockets = listening([store.pid])
    assert {name for _, name, _, _ in sockets} == {"versitygw"}, sockets
    assert store.port in {port for *_, port in sockets}, sockets
    assert [s for s in sockets if not on_loopback(s[2])] == [], sockets


def test_the_labs_delay_proxy_listens_on_loopback_only(s3_store):
    proxy = lab_module.status().s3_proxy  # started with the store, in front of it
    sockets = listening([proxy.pid])
    assert proxy.port in {port for *_, port in sockets}, sockets
    assert [s for s in sockets if not on_loopback(s[2])] == [], sockets


@pytest.mark.slow
def test_a_child_session_with_the_ui_on_listens_on_loopback_only(lab):
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}  # the lab's builder must set it itself
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_SESSION],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = child.stdout.readline()
        assert line.startswith("UI "), line
        sockets = listening([child.pid])
        ui_port = int(line.rsplit(":", 1)[1])
        assert ui_port in {port for *_, port in sockets}, (line, sockets)
        assert [s for s in sockets if not on_loopback(s[2])] == [], sockets
    finally:
        child.stdin.close()
        child.wait(timeout=60)
