"""Read what Spark actually ran: the physical plan of a running streaming query."""

from pyspark.sql.streaming import StreamingQuery

# The scan node Spark plans for a source read in real-time mode; micro-batch plans a MicroBatchScan instead.
REAL_TIME_SCAN = "RealTimeStreamScan"


def executed_plan(query: StreamingQuery) -> str:
    """The extended plan text of the query's last execution ('No physical plan' until a batch has started)."""
    return query._jsq.explainInternal(True)
