"""Benchmarks: measured runs on the local lab whose JSON results feed the generated tables and plots in docs/results."""
