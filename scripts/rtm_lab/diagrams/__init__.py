"""The concept diagrams, written as SVG by plain Python: the timeline of micro-batch and real-time mode, and the
task slots a real-time query holds. `scripts/tables.py` writes them into docs/diagrams/ and checks them in lint."""
