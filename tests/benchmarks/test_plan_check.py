"""The plan check's pure parts (rtm_lab.benchmarks.plan_check): what the planner predicts at each factor of the
capacity, and the table of predictions beside observations. The runs themselves are the benchmark's (bench.py
plan-check), on a quiet machine."""

from rtm_lab.benchmarks import plan_check


def test_the_planner_predicts_held_up_to_the_capacity_and_not_above():
    assert [plan_check.prediction("groupby-count", f * 8000, 8000, 100)["predicted"] for f in (0.5, 0.9, 1.3)] == [
        "held",
        "held",
        "not held",
    ]
    assert plan_check.prediction("groupby-count", 4000, 8000, 100)["slots"] == 2  # one source, one shuffle task
    assert plan_check.prediction("stateless", 4000, 8000, 100)["slots"] == 1


def test_the_table_sets_the_observed_verdict_beside_the_predicted_one():
    def run(factor, p99):
        rate = round(factor * 8000)
        return {
            "shape": "stateless",
            "factor": factor,
            "rate": rate,
            "predicted": plan_check.prediction("stateless", rate, 8000, 100)["predicted"],
            "p99_ms": p99,
            "lost": 0,
            "reached_rate": rate,
            "started": "2026-11-27T12:00:00Z",
            "timestamp": "2026-11-27T12:02:00Z",
        }

    result = {
        "settings": {
            "bound_ms": 100,
            "runs_per_step": 3,
            "seconds": 60,
            "warmup_s": 10,
            "capacity": 8000,
            "capacity_source": "--capacity",
        },
        "runs": [run(0.5, 40), run(0.5, 45), run(0.5, 50), run(1.3, 900)],
        "machine": {"cores": 2, "memory_gib": 8, "cpu_model": "test", "os": "Linux"},
        "versions": {"spark": "4.3.0"},
        "command": "python scripts/bench.py plan-check",
    }
    text = plan_check.markdown(result)
    assert "| stateless | 0.5× | 4,000 | held | held | 45 (40–50) | 3 |" in text
    assert "| stateless | 1.3× | 10,400 | not held | not held | 900 (900–900) | 1 |" in text
