"""Monitoring in the lab: a Prometheus server (prometheus.py) the lab starts on request, and its client calls."""
