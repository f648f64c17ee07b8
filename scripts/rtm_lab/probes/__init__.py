"""Probes: the case harnesses that run snippets' queries against Spark and record what it did (support matrix, errors
gallery, slot sizing, Kafka tuning, the readiness check's cross-check, the version matrix's cases). They sit above the
snippets and below the entry points and tests."""
