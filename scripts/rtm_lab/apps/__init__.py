"""Apps: the small programs and pieces a test or benchmark runs as Spark code of its own, outside the test process or
inside Spark's Python workers (which unpickle a sink by module name, so it must live in an installed module): fault
injecting sinks, the console-sink query, the transformWithState runs and the `spark-submit` pipeline. They sit above
the snippets they run and below the probes, benchmarks, entry points and tests that start them."""
