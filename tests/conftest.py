"""Shared fixtures: the lab (started once per run), the SparkSession, a fresh Kafka topic and Postgres schema per test.

The lab fixture starts only what is not already running, and stops at the end only what it started, so a developer
who ran `python scripts/lab.py up` keeps their services, and CI (nothing running) gets a clean stop.
"""

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import parallel
import pytest
import short_lived_jvms
import verified_by

from rtm_lab import lab as lab_module
from rtm_lab import standalone, topics
from rtm_lab.lab import LabState
from rtm_lab.s3a import Store, lab_store
from rtm_lab.snippet_jar import session_jars
from rtm_lab.spark import keep_on_loopback, spark_session

# Before any session or child process starts: every Spark driver the tests start, in this process or in the
# snippets and scripts they run as children, listens on loopback only (tests/lab/test_loopback.py checks it).
keep_on_loopback()
# Every short-lived JVM the tests start compiles with C1 only, and Spark drivers map the classes `make setup` archived:
# seconds of CPU less per start-up on 2 cores (tests/short_lived_jvms.py says what and why).
short_lived_jvms.apply()


@pytest.fixture(scope="session")
def lab(request) -> Iterator[LabState]:
    state, started = lab_module.up(log=lambda line: print(line))
    if parallel.is_worker(request.config):
        # Another worker may still be using it: the controller stops it once all are done.
        parallel.record_started(request.config, started)
        yield state
        return
    yield state
    if started:
        lab_module.down(only=started, log=lambda line: print(line))


@pytest.fixture(scope="session")
def s3_store(request, lab) -> Iterator[Store]:
    """The lab's object store (versitygw, built on first use) and its bucket: started once per run if it is down,
    stopped at the end only if this run started it (under xdist, by the controller once every worker is done)."""
    _, started = lab_module.up(log=lambda line: print(line), with_services={"s3"})
    if parallel.is_worker(request.config):
        parallel.record_started(request.config, started)
        yield lab_store()
        return
    yield lab_store()
    if started:
        lab_module.down(only=started, log=lambda line: print(line))


@pytest.fixture(scope="session")
def spark(lab):
    # spark.jars is read once, at start-up: the JVM snippets (all of snippets/jvm in one jar) and PgJDBC go in now.
    conf = {"spark.jars": session_jars()}
    session = spark_session("rtm-tests", slots=4, conf=conf)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory) -> Iterator[standalone.Cluster]:
    """One loopback standalone cluster (two workers, 2 cores each) for every test that submits to a cluster: its
    start-up (three JVMs, the workers registering) is paid once. Each application leaves when its driver stops, and
    the master gives its cores back, so the tests do not see each other's executors."""
    with standalone.cluster(workers=2, cores_per_worker=2, work_dir=tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def flink_venv() -> Path:
    """The pinned PyFlink venv's python (.venv-flink), built on first use and reused while its pins are unchanged."""
    from rtm_lab.engines import flink

    return flink.ensure_venv(log=lambda line: print(line))


@pytest.fixture
def kafka_topic(lab) -> Iterator[Callable[..., str]]:
    """Factory: kafka_topic(partitions=2, configs=None) -> a new, empty topic's name (deleted after the test)."""
    made: list[str] = []

    def make(partitions: int = 2, configs: dict[str, str] | None = None, prefix: str = "t") -> str:
        name = topics.create_topic(lab.kafka_bootstrap, topics.unique_name(prefix), partitions, configs)
        made.append(name)
        return name

    yield make
    for name in made:
        topics.delete_topic(lab.kafka_bootstrap, name)


@pytest.fixture
def pg_schema(lab) -> Iterator[str]:
    """A fresh Postgres schema, dropped after the test; connect with `lab.postgres_dsn`."""
    from psycopg2 import sql
    from sink_helpers import run_sql

    name = f"test_{uuid.uuid4().hex[:10]}"
    run_sql(lab.postgres_dsn, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        run_sql(lab.postgres_dsn, sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def quiet_machine(request) -> Callable[[], AbstractContextManager[None]]:
    """For a test marked `timing` or `alone` whose first steps neither measure nor disturb anything: it runs beside
    other tests until `with quiet_machine():`, and inside that block alone, or for a `timing` test first in line for
    the CPU (tests/parallel.py)."""
    return lambda: parallel.quiet_from_here(request.node)


@pytest.fixture
def checkpoint(tmp_path) -> str:
    return str(tmp_path / "checkpoint")


@pytest.fixture
def stop_after(request) -> Callable:
    """Register a streaming query to be stopped when the test ends, whatever happens."""
    queries = []
    request.addfinalizer(lambda: [q.stop() for q in queries if q.isActive])
    return lambda query: queries.append(query) or query


# The pages' "Verified by" references, checked against the run (see tests/verified_by.py).
_outcomes: dict[str, str] = {}
_collected: list[str] = []


def pytest_configure(config) -> None:
    parallel.configure(config)


def pytest_unconfigure(config) -> None:
    if parallel.is_controller(config):
        started = parallel.started_by_workers()
        if started:
            lab_module.down(only=started, log=lambda line: print(line))
    parallel.finish(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    with parallel.turn(item):
        return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    # Under xdist the controller collects nothing itself: every worker sends the same list, one is kept.
    if not _collected:
        _collected.extend(ids)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return None if config.getvalue("dist") == "each" else parallel.make_scheduler(config, log)


def pytest_collection_modifyitems(session, config, items) -> None:
    if parallel.is_worker(config):
        parallel.order(items)
    _collected.extend(item.nodeid for item in items)
    # A test that needs the services says so by asking for them: `pytest -m "not lab"` runs the rest with nothing
    # started (fixtures that use `lab`, such as `spark` or `kafka_topic`, count too).
    for item in items:
        if "lab" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.lab)


def pytest_runtest_logreport(report) -> None:
    if report.skipped:
        _outcomes[report.nodeid] = verified_by.SKIPPED
    elif report.failed:
        _outcomes[report.nodeid] = verified_by.FAILED
    elif report.when == "call" and _outcomes.get(report.nodeid) is None:
        _outcomes[report.nodeid] = verified_by.PASSED


def pytest_sessionfinish(session, exitstatus) -> None:
    config = session.config
    if parallel.is_worker(config):
        return  # a worker saw its share of the outcomes: the controller checks the whole run
    full = verified_by.is_full_run(
        list(config.args), config.rootpath, config.option.markexpr or "", config.option.keyword or ""
    )
    if not full or config.option.collectonly or not _collected or exitstatus not in (0, 1):
        return
    lines = verified_by.problems(verified_by.references(), _outcomes, _collected)
    if lines:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        say = reporter.write_line if reporter else print
        say(f"\n{len(lines)} page reference(s) to tests that do not back them (tests/verified_by.py):")
        for line in lines:
            say(f"  {line}")
        session.exitstatus = 1
