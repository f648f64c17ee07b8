"""The two stateful query shapes of the checkpoint-storage benchmark, beside the stateless passthrough.

Each keeps the passthrough's output (one record per event, carrying its id and its source record's broker timestamp),
so the latency and the stall are measured the same way for every shape. Each keeps one state row per event.

- `dedup`: `dropDuplicates` on the event id;
- `count`: a `groupBy` count keyed by the event id (real-time mode emits an update per input row), so each update is
  the row's own.
"""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from snippets.quickstart.kafka_to_kafka import EVENT_SCHEMA

SHAPES = ("dedup", "count")


def _events(raw: DataFrame) -> DataFrame:
    event = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")
    return raw.select(event, F.unix_millis(F.col("timestamp")).alias("source_ts_ms")).select(
        "e.id", "e.user", "source_ts_ms"
    )


def transform(shape: str, raw: DataFrame) -> DataFrame:
    events = _events(raw)
    if shape == "dedup":
        out = events.dropDuplicates(["id"])
    elif shape == "count":
        out = events.groupBy("id", "source_ts_ms").agg(F.count(F.lit(1)).alias("events"))
    else:
        raise ValueError(f"unknown shape {shape!r}; expected one of {', '.join(SHAPES)}")
    return out.select(F.col("id").cast("string").alias("key"), F.to_json(F.struct(*out.columns)).alias("value"))
