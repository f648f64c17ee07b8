"""The local lab: real Kafka, PostgreSQL and Spark for the snippets, tests and benchmarks."""
