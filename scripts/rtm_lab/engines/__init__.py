"""The other engine of the "Real-time mode or Flink?" comparison: Apache Flink, run from PyFlink in a venv of its own.

`flink` builds that venv on demand (`.venv-flink`, rebuilt when its pins change), fetches Flink's Kafka connector from
the jar lock, and starts and stops a PyFlink program (one local MiniCluster per job) with the lab's process-identity
discipline. `kafka_clients` says which kafka-clients each engine's connector carries. `output` reads a sink topic and
reduces it to what both engines must agree on.
"""
