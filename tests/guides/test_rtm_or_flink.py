"""Real-time mode or Flink? The four pipelines on both engines, on one input, write the same output.

One input topic (events with repeated ids) feeds both engines. Flink runs its four jobs in one PyFlink process for the
whole module (each job on its own local MiniCluster, parallelism 2 = the topic's partitions); each test starts the
pipeline's RTM query on the session's Spark (2 shuffle partitions), reads both sink topics and compares. The Flink
venv is built on first use (tests/conftest.py's `flink_venv`), so its build is counted in the run's time.
"""

import ast
import contextlib
import json
import os
import subprocess
from collections import Counter

import pytest
from short_lived_jvms import C1_ONLY

from rtm_lab import processes, topics, versions
from rtm_lab.engines import flink, kafka_clients, output
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.spark import driver_memory
from snippets.guides import rtm_or_flink_spark
from snippets.guides.rtm_or_flink_spark import start_pipeline

# The first test to need the Flink venv builds it (pip fetches a few hundred MB the first time): room beyond the
# suite's 300 s default for that build on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# The PyFlink twin runs in the Flink venv, as a program: this test never imports it (PyFlink is not in this venv).
FLINK_MODULE = "snippets.guides.rtm_or_flink_flink"
FLINK_PROGRAM = PROJECT_ROOT.joinpath(*FLINK_MODULE.split(".")).with_suffix(".py")
PAGE = PROJECT_ROOT / "docs" / "guides" / "rtm-or-flink.md"
PARTITIONS = 2  # the source topic's partitions = Flink's parallelism = the RTM query's shuffle partitions
N_IDS, N_REPEATED = 200, 40
EVENTS = [{"id": i, "user": f"user{i % 7}", "amount": i + 0.25, "created_ms": 1_000 + i} for i in range(N_IDS)]
# The first ids again, unchanged: a repeated delivery, what dropDuplicates removes.
INPUT = EVENTS + EVENTS[:N_REPEATED]
TIERED = {user for user, _ in rtm_or_flink_spark.TIERS}


def flink_constants() -> dict:
    """The Flink twin's module-level constants, read without importing PyFlink (it lives in its own venv)."""
    found = {}
    for node in ast.parse(FLINK_PROGRAM.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            with contextlib.suppress(ValueError):  # PIPELINES names functions: not a literal
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


@pytest.fixture(scope="module")
def comparison(lab, flink_venv):
    """The input topic, a sink topic per engine and pipeline, and Flink running all four pipelines on it."""
    made = []

    def topic(prefix: str) -> str:
        made.append(topics.create_topic(lab.kafka_bootstrap, topics.unique_name(prefix), PARTITIONS))
        return made[-1]

    source = topic("engines-in")
    topics.produce_json(lab.kafka_bootstrap, source, INPUT)
    sinks = {
        name: {"flink": topic(f"flink-{name}"), "spark": topic(f"rtm-{name}")} for name in rtm_or_flink_spark.PIPELINES
    }
    runs = [word for name, sink in sinks.items() for word in (name, source, sink["flink"])]
    try:
        env = {"KAFKA_BOOTSTRAP_SERVERS": lab.kafka_bootstrap}
        with flink.running(FLINK_PROGRAM, ["--parallelism", str(PARTITIONS), *runs], env) as run:
            run.wait_for("started ", count=len(sinks))
            yield source, sinks, run
    finally:
        for name in made:
            topics.delete_topic(lab.kafka_bootstrap, name)


def both_outputs(lab, spark, comparison, checkpoint, stop_after, name, done):
    """Start the RTM query of pipeline `name`; read both engines' sink topics until `done(records)` holds."""
    source, sinks, run = comparison
    query = stop_after(start_pipeline(spark, name, lab.kafka_bootstrap, source, sinks[name]["spark"], checkpoint))
    out = {engine: output.read_until(lab.kafka_bootstrap, topic, done) for engine, topic in sinks[name].items()}
    assert query.exception() is None
    assert run.running(), run.output()[-3000:]
    # Shown with `pytest -rP`: the evidence a reviewer reads (records per engine, distinct keys).
    for engine, records in out.items():
        print(f"{name}: {engine} wrote {len(records)} records, {len({r.key for r in records})} keys")
    return out["spark"], out["flink"]


def test_the_suites_flink_gateway_compiles_with_c1_only(comparison):
    """tests/short_lived_jvms.py's JVM_ARGS reaches the gateway JVM the PyFlink program starts, before the heap."""
    _, _, run = comparison
    java = [args for args in map(processes.arguments, processes.children(run.pid)) if C1_ONLY in args]
    assert java and java[0].index(C1_ONLY) < java[0].index(f"-Xmx{driver_memory()}"), [
        processes.arguments(pid) for pid in processes.children(run.pid)
    ]


def test_transform_writes_the_same_records(lab, spark, comparison, checkpoint, stop_after):
    spark_out, flink_out = both_outputs(
        lab, spark, comparison, checkpoint, stop_after, "transform", lambda records: len(records) >= len(INPUT)
    )
    assert output.content(spark_out) == output.content(flink_out)
    assert len(spark_out) == len(INPUT)
    rows = [json.loads(r.value) for r in flink_out]
    assert Counter(r["id"] for r in rows) == Counter(e["id"] for e in INPUT)
    assert all(r["user"] == f"USER{r['id'] % 7}" and r["amount_cents"] == r["id"] * 100 + 25 for r in rows)
    assert all(r["source_ts_ms"] > 1_700_000_000_000 for r in rows)  # the Kafka timestamp, in ms, from both


def test_count_ends_with_the_same_count_per_key(lab, spark, comparison, checkpoint, stop_after):
    expected = Counter(e["user"] for e in INPUT)

    def final_counts_reached(records) -> bool:
        return {k: v["count"] for k, v in output.final_values(records).items()} == expected

    spark_out, flink_out = both_outputs(lab, spark, comparison, checkpoint, stop_after, "count", final_counts_reached)
    assert output.final_values(spark_out) == output.final_values(flink_out)
    assert output.final_values(flink_out) == {user: {"user": user, "count": n} for user, n in expected.items()}
    # Every update is written by both: at least one record per key, at most one per input event.
    assert len(expected) <= len(spark_out) <= len(INPUT) and len(expected) <= len(flink_out) <= len(INPUT)


def test_enrich_writes_the_same_joined_records(lab, spark, comparison, checkpoint, stop_after):
    wanted = [e for e in INPUT if e["user"] in TIERED]
    spark_out, flink_out = both_outputs(
        lab, spark, comparison, checkpoint, stop_after, "enrich", lambda records: len(records) >= len(wanted)
    )
    assert output.content(spark_out) == output.content(flink_out)
    assert len(flink_out) == len(wanted)


def test_dedup_writes_each_id_once_on_both(lab, spark, comparison, checkpoint, stop_after):
    spark_out, flink_out = both_outputs(
        lab, spark, comparison, checkpoint, stop_after, "dedup", lambda records: len(records) >= N_IDS
    )
    assert output.content(spark_out) == output.content(flink_out)
    assert len(flink_out) == N_IDS
    assert sorted(r.key for r in flink_out) == sorted(str(i).encode() for i in range(N_IDS))


def test_flink_runs_with_the_spark_drivers_heap_and_the_topics_partitions(spark, comparison):
    """The JVM PyFlink started, where each job gets its own MiniCluster, has the Spark driver's -Xmx; the jobs'
    parallelism is the topics' partition count, as is the RTM query's shuffle partition count."""
    import psutil

    _, _, run = comparison
    program = psutil.Process(run.pid)
    (jvm,) = [p for p in program.children(recursive=True) if p.name() == "java"]
    assert f"-Xmx{driver_memory()}" in jvm.cmdline()
    assert spark.sparkContext.getConf().get("spark.driver.memory") == driver_memory()
    command = program.cmdline()
    assert command[command.index("--parallelism") + 1] == str(PARTITIONS)
    # Local execution starts a MiniCluster per submitted job: one per pipeline, all in that one JVM.
    flink_log = "".join(p.read_text(errors="replace") for p in (run.folder / "log").glob("*.log"))
    assert flink_log.count("Starting Flink Mini Cluster") == len(rtm_or_flink_spark.PIPELINES)
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(PARTITIONS)


def test_both_engines_use_the_same_kafka_settings_and_checkpoint_as_often():
    twin = flink_constants()
    assert twin["CONSUMER"] == rtm_or_flink_spark.CONSUMER
    assert twin["PRODUCER"] == rtm_or_flink_spark.PRODUCER
    assert twin["TIERS"] == rtm_or_flink_spark.TIERS
    assert twin["CHECKPOINT_INTERVAL"] == "5 min" and rtm_or_flink_spark.BATCH_DURATION == "5 minutes"


def test_each_engine_runs_the_stated_kafka_clients():
    assert kafka_clients.versions() == {
        "spark": versions.KAFKA_CLIENTS_VERSION,
        "flink": versions.FLINK_KAFKA_CLIENTS_VERSION,
    }


# Run in the Flink venv: plan (never run) what Flink refuses, with the twin's own source and sink definitions.
REFUSALS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pyflink.java_gateway import get_gateway
from pyflink.table import DataTypes
from pyflink.table.udf import udf
from rtm_or_flink_flink import create_source, kafka_sink, table_environment

t_env = table_environment(2, sys.argv[2])
create_source(t_env, "127.0.0.1:9", "never-read")
t_env.execute_sql(
    f"CREATE TEMPORARY TABLE appended (k BYTES, `user` STRING, n BIGINT) WITH ({kafka_sink('127.0.0.1:9', 'x')})"
)
t_env.create_temporary_function("py_upper", udf(lambda s: s.upper(), result_type=DataTypes.STRING()))
queries = {
    "stream-stream join into kafka": (
        "SELECT a.k, a.`user`, b.created_ms FROM events AS a JOIN events AS b ON a.id = b.id"
    ),
    "python udf into kafka": "SELECT k, py_upper(`user`), created_ms FROM events",
    "count into kafka": "SELECT CAST(`user` AS BYTES), `user`, COUNT(*) FROM events GROUP BY `user`",
    "top-1 by a column into kafka": (
        "SELECT k, `user`, created_ms FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY `user` ORDER BY created_ms DESC)"
        " AS row_num FROM events) WHERE row_num = 1"
    ),
}
for name, query in queries.items():
    try:
        t_env.explain_sql(f"INSERT INTO appended {query}")
        print(json.dumps({name: "planned"}))
    except Exception as exc:
        print(json.dumps({name: str(exc).splitlines()[0] if str(exc) else type(exc).__name__}))
options = get_gateway().jvm.org.apache.flink.configuration.ExecutionOptions
print(json.dumps({"buffer timeout ms": options.BUFFER_TIMEOUT.defaultValue().toMillis()}))
"""


def test_flink_refuses_an_updating_query_into_the_plain_kafka_sink(flink_venv, tmp_path):
    """The page's Flink refusals, planned by Flink 2.2.1 itself: a running count or a Top-N by a column updates its
    rows, and the `kafka` sink takes inserts only (the count pipeline writes to `upsert-kafka`). A stream-stream join
    and a Python UDF, which real-time mode refuses, are planned. And Flink's default buffer timeout (concept map)."""
    from rtm_lab.engines.flink import connector_jar

    program = tmp_path / "refusals.py"
    program.write_text(REFUSALS)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["JVM_ARGS"] = "-Xmx512m"
    env["FLINK_LOG_DIR"] = str(tmp_path)
    done = subprocess.run(
        [str(flink_venv), str(program), str(FLINK_PROGRAM.parent), str(connector_jar())],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = {k: v for line in done.stdout.splitlines() if line.startswith("{") for k, v in json.loads(line).items()}
    for name in ("count into kafka", "top-1 by a column into kafka"):
        assert "doesn't support consuming update" in said[name], said
    # What real-time mode refuses and Flink plans (running them is not tested here).
    assert said["stream-stream join into kafka"] == "planned", said
    assert said["python udf into kafka"] == "planned", said
    assert said["buffer timeout ms"] == 100


def test_the_page_installs_the_pinned_flink_and_connector():
    text = PAGE.read_text()
    assert f"pip install apache-flink=={versions.FLINK_VERSION}" in text
    assert f"flink-sql-connector-kafka-{versions.FLINK_KAFKA_CONNECTOR_VERSION}.jar" in text
    assert f"apache-flink=={versions.FLINK_VERSION}" in flink.REQUIREMENTS.read_text()
