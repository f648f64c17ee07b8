"""The term check (rtm_lab.terms, rules in scripts/rtm_lab/glossary.yml): each retired name fails, the other intervals
pass, "recommended" next to the batch duration fails wherever it is written, and the glossary page shows the rules."""

from pathlib import Path

import pytest

from rtm_lab import prose, terms

TERMS = terms.load()


def retired(sentence: str) -> list[str]:
    return [rule.shown for _, rule, _ in terms.retired_names(sentence, TERMS)]


def test_the_glossary_has_the_eleven_terms_of_the_issue():
    names = {term.name for term in TERMS}
    assert names == {
        "batch duration", "batch", "task slot", "streaming shuffle", "allowlist", "commit", "replay", "lab",
        "connector", "sink", "held rate",
    }  # fmt: skip


@pytest.mark.parametrize(
    "sentence",
    [
        "At the 5-minute interval a run crosses no boundary.",
        "Choosing the interval",
        "Rows wait for the interval end.",
        "Half an interval into a batch the driver is killed.",
        "The default interval is 5 minutes.",
        "A batch lasts a whole checkpoint interval.",
        "Up to one batch interval of matches is emitted twice.",
        "Every mode and real-time interval was measured.",
        "A real-time batch lasts the whole trigger interval.",
        "The trigger duration sets the commit pace.",
        "A longer `realTime` duration writes fewer checkpoints.",
        "Spark's real-time intervals",
        "Real-time mode in Lakeflow pipelines (checkpoint interval `pipelines.trigger.interval`) is described there.",
    ],
)
def test_a_name_for_the_batch_duration_other_than_its_own_fails(sentence):
    assert retired(sentence), sentence


@pytest.mark.parametrize(
    "sentence",
    [
        "The batch duration is 5 minutes, Spark's default.",
        "The executor's heartbeat interval is 10 s.",
        "Prometheus's scrape interval is 5 s and its evaluation interval 15 s.",
        "Flink's checkpoint interval is 5 minutes in the comparison.",
        "Flink checkpoints every 5 minutes (its checkpoint interval).",
        "A micro-batch trigger interval of 500 ms, set with `processingTime`.",
        "With `processingTime`, the trigger interval is a target, not a guarantee.",
        "The batch duration acts as a checkpoint interval, not as a latency target.",
        'Spark\'s guide calls the section "Batch Duration Is a Checkpoint Interval".',
        'Spark\'s guide calls it "a checkpoint interval, not a latency target".',
        "Set `spark.executor.heartbeatInterval` and `execution.checkpointing.interval` as below.",
        "Flink: `execution.buffer-timeout.interval=5 ms`.",
        "The alert's rule group interval is one minute.",
        "Kafka's commit interval does not apply.",
        "`--interval` takes a duration.",
    ],
)
def test_other_intervals_keep_their_names(sentence):
    assert retired(sentence) == [], sentence


@pytest.mark.parametrize(
    ("sentence", "term"),
    [
        ("The epoch ends at the commit.", "batch"),
        ("Each executor slot runs a task.", "task slot"),
        ("A pipelined shuffle moves rows.", "streaming shuffle"),
        ("The whitelist refuses it.", "allowlist"),
        ("At the checkpoint commit Spark writes offsets.", "commit"),
        ("A restart reprocesses the batch.", "replay"),
        ("Start the test environment first.", "lab"),
        ("Add the Kafka package to the session.", "connector"),
        ("The output sink must be idempotent.", "sink"),
        ("The sink kept up with 10,000 rows/s.", "held rate"),
        ("Flink keeps up at 40,000 events/s.", "held rate"),
    ],
)
def test_each_terms_retired_names_fail(sentence, term):
    assert [found.name for found, _, _ in terms.retired_names(sentence, TERMS)] == [term]


@pytest.mark.parametrize(
    "sentence",
    [
        "The timestamps are milliseconds since the epoch.",
        "Spark fails it: mixes a pipelined shuffle dependency with a regular shuffle.",
        "The allowlist refuses it.",
        "The task slot count is the sum of both stages.",
        "The generator held its rate and nothing was lost.",
    ],
)
def test_the_one_names_pass(sentence):
    assert retired(sentence) == []


@pytest.mark.parametrize(
    "sentence",
    [
        "Spark recommends 5 minutes.",
        'At the recommended `realTime="5 minutes"` an idle partition can hold a key.',
        "Rate run: three rates at the recommended interval",
        "The batch duration Spark's real-time guide recommends: rows are handled as they arrive.",
        "five minutes, as Spark's guide recommends",
        "test latency page at the recommended interval the real time p99",
        "test_runs_at_the_recommended_real_time_interval",
        "Both run at the real-time interval Spark recommends (5 minutes).",
    ],
)
def test_calling_the_default_a_recommendation_fails(sentence):
    assert terms.recommended_next_to_batch_duration(sentence, TERMS)


@pytest.mark.parametrize(
    "sentence",
    [
        "Disabling the allowlist check is (not recommended) and at your own risk, says Spark's guide.",
        "We recommend `fetch.max.wait.ms=50` for the Kafka source.",
        "The batch duration is 5 minutes, Spark's default.",
        "Prometheus recommends a scrape interval shorter than the alert's window.",
        "Real-time mode is recommended for stateless pipelines on this project's measurements.",
        "One slot per partition, which the real-time query needs; fetch wait 10 ms (Kafka tuning recommends 50).",
    ],
)
def test_the_word_elsewhere_passes(sentence):
    assert not terms.recommended_next_to_batch_duration(sentence, TERMS)


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def test_files_are_checked_in_comments_strings_skills_and_test_names(tmp_path):
    write(tmp_path, "snippets/a.py", "# Spark's guide\n# recommends 5 minutes: fewer stalls.\nX = 1\n\n# Fine.\n")
    write(tmp_path, "scripts/b.py", 'HELP = "the batch duration (default 5 minutes)"\nRECOMMENDED = "5 minutes"\n')
    write(tmp_path, "skills/s/SKILL.md", 'Intro.\n\nSpark\'s guide recommends\n`realTime="5 minutes"`.\n\n- kept up\n')
    write(
        tmp_path,
        "skills/s/CHANGELOG.md",
        "# Changes\n\n## 2\n\n- Default, not recommended.\n\n## 1\n\n- At the recommended 5 minutes.\n",
    )
    write(
        tmp_path,
        "tests/test_c.py",
        "def test_runs_at_the_recommended_interval():\n    pass\n\ndef test_fine():\n    pass\n",
    )
    hits = terms.check_files(TERMS, root=tmp_path)
    assert sorted(hit.where for hit in hits) == [
        "scripts/b.py:2", "skills/s/SKILL.md:3", "skills/s/SKILL.md:6", "snippets/a.py:2", "tests/test_c.py:1",
    ]  # fmt: skip


def test_the_glossary_page_shows_each_term_with_its_retired_names_and_a_link():
    text = terms.glossary_markdown(TERMS)
    for term in TERMS:
        title = term.name[0].upper() + term.name[1:]
        assert f"## {title}\n\n**{title}**: " in text
        assert "Explained in [" in text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    assert text.count("Not: ") == len(TERMS)


def test_the_glossary_page_passes_its_own_check():
    assert terms.check_pages(TERMS, ["glossary.md"]) == []
    figures = prose.measure("glossary.md")
    assert prose.missed_targets(figures) == []
