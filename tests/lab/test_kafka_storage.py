"""The broker's storage is formatted with a cluster id the storage tool can never misread as an option.

A URL-safe base64 UUID starts with `-` one time in 64; passed as `-t <id>`, Kafka's argument parser took it for a
flag and `lab.py up` failed ("argument --cluster-id/-t: expected one argument").
"""

import uuid

from rtm_lab import kafka
from rtm_lab.java import check_java

# First byte 0xF8: its top six bits are 62, which URL-safe base64 writes as "-".
DASH_FIRST = uuid.UUID(bytes=b"\xf8" + bytes(15))


def test_an_id_that_would_start_with_a_dash_is_drawn_again():
    draws = iter([DASH_FIRST, DASH_FIRST, uuid.UUID(int=1)])
    assert kafka.cluster_id(draw=lambda: next(draws)) == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_ids_have_the_form_kafka_prints():
    ids = {kafka.cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_storage_formats_with_an_id_that_starts_with_a_dash(tmp_path):
    """The argument form itself is safe: even an id Kafka would never draw formats the storage."""
    dashed = "-" + kafka.cluster_id()[1:]
    assert dashed.startswith("-")
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(kafka.SERVER_PROPERTIES.format(port=19092, controller_port=19093, data_dir=data))
    java, _ = check_java()
    kafka.format_storage(java, kafka.classpath(), config, dashed)
    assert f"cluster.id={dashed}" in (data / "meta.properties").read_text()
