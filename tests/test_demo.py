"""`make demo`'s program, short: the seed pipeline at the recommended interval through the JVM writer, nothing lost,
the master it really ran on named, and Spark's log summed up with no error left unexplained.

The errors the summary explains are what Spark 4.3 logs when a real-time query with a shuffle (here dropDuplicates)
is stopped mid-batch; the query itself ends without an error, or the demo would have failed.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rtm_lab.paths import PROJECT_ROOT
from snippets.guides.kafka_to_postgres import REAL_TIME_INTERVAL


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_demo_delivers_everything_at_the_recommended_interval_and_explains_every_spark_error(lab):
    cmd = [sys.executable, "scripts/demo.py", "--rate", "500", "--seconds", "8", "--warmup", "2"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=280)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]

    assert f'realTime="{REAL_TIME_INTERVAL}"' in out and "via the jvm writer" in out
    assert re.search(r"spark +running on local\[4\]", out), out  # 2 partitions + 2 shuffle partitions, named as run
    assert re.search(r"lost 0, duplicate keys 0", out), out
    assert re.search(r"other writer +the python writer", out), out

    log = re.search(r"Spark's log +(\S+): (\d+) warnings, (\d+) errors(?: \((\d+) of them from stopping)?", out)
    assert log, out
    errors, explained = int(log[3]), int(log[4] or 0)
    assert errors == explained, Path(log[1]).read_text()[-3000:]
    # What the summary promises of the file: every error in it is the stop-time notice it names.
    text = Path(log[1]).read_text()
    assert text.count(" ERROR ") == errors
    assert len(re.findall(r"Connection to streaming shuffle writer \d+ closed before termination", text)) >= errors
    # SESSION_CONF's shuffle buffer holds the largest dead letter: the streaming shuffle has no row to warn about.
    assert "is larger than the block size" not in text
