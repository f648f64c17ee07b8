"""`lab.py up --with s3`: the object store on loopback, a free port, state in the lab folder, stopped by `down`, and
its keys generated per lab folder and shown nowhere: not in the CLI's output, the server's command line or its log.

The test runs the CLI against a lab folder of its own, with the session lab's Kafka and PostgreSQL given as external
services (so only the store starts), and the versitygw binary the session lab built (RTM_VERSITYGW_BIN).
"""

import json
import stat

import pytest
from own_lab import lab_cli, own_lab_folder
from test_loopback import listening, on_loopback

from rtm_lab import processes, s3_requests, s3store

pytestmark = pytest.mark.slow  # a store start and stop, a few seconds


@pytest.fixture
def own_lab(lab, tmp_path):
    with own_lab_folder(lab, tmp_path, RTM_VERSITYGW_BIN=str(s3store.binary())) as found:
        yield found


def test_up_with_s3_runs_the_store_on_loopback_with_private_keys_and_down_stops_it(own_lab):
    env, lab_dir = own_lab
    up = lab_cli("up", "--with", "s3", env=env)
    assert up.returncode == 0, up.stderr
    state = json.loads((lab_dir / "state.json").read_text())["s3"]
    pid, port = state["pid"], state["port"]
    assert f"s3        up    http://127.0.0.1:{port} pid {pid}" in up.stdout
    assert processes.is_ours(pid, state["started"], str(lab_dir / "s3" / "data"))
    sockets = listening([pid])
    assert {p for *_, p in sockets} == {port}, sockets
    assert [s for s in sockets if not on_loopback(s[2])] == [], sockets

    key_file = lab_dir / "s3" / "credentials.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    keys = s3_requests.Credentials(**json.loads(key_file.read_text()))
    assert len(keys.access_key) == 20 and len(keys.secret_key) == 40
    # The keys work (the bucket `up` created lists), and appear in no output, command line or log.
    assert s3_requests.list_keys(f"http://127.0.0.1:{port}", keys, s3store.BUCKET) == []
    env_out = lab_cli("env", env=env).stdout
    assert f"export RTM_S3_ENDPOINT=http://127.0.0.1:{port}" in env_out
    assert f"export RTM_S3_CREDENTIALS_FILE={key_file}" in env_out
    files = [lab_dir / "s3" / "versitygw.log", lab_dir / "state.json"]
    outputs = [up.stdout, up.stderr, env_out, lab_cli("status", env=env).stdout]
    shown = "\n".join([*outputs, *processes.arguments(pid), *(path.read_text() for path in files)])
    assert keys.access_key not in shown and keys.secret_key not in shown

    down = lab_cli("down", env=env)
    assert down.returncode == 0, down.stderr
    assert not processes.is_alive(pid)
    assert "s3" not in lab_cli("status", env=env).stdout  # listed only while it runs or ran under this record


def test_a_second_lab_folder_gets_other_keys(own_lab, s3_store):
    env, lab_dir = own_lab
    assert lab_cli("up", "--with", "s3", env=env).returncode == 0
    theirs = json.loads((lab_dir / "s3" / "credentials.json").read_text())
    assert theirs["access_key"] != s3_store.credentials.access_key
    assert theirs["secret_key"] != s3_store.credentials.secret_key
    # The session lab's keys do not open this lab's store (versitygw 1.8.0 answers an unknown key with this code).
    port = json.loads((lab_dir / "state.json").read_text())["s3"]["port"]
    with pytest.raises(s3_requests.S3Error) as refused:
        s3_requests.list_keys(f"http://127.0.0.1:{port}", s3_store.credentials, s3store.BUCKET)
    assert refused.value.status == 404 and "<Code>XAdminUserNotFound</Code>" in str(refused.value)
