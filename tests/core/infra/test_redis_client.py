"""Redis URLs of the three shapes, parsed; passwords masked in what is printed."""

from __future__ import annotations

import pytest

from core.infra.redis_client import mask_url, parse_url


def test_a_plain_url_is_one_server_as_redis_py_reads_it() -> None:
    for url in ("redis://:pw@127.0.0.1:6380/2", "rediss://cache.example:6380", "unix:///tmp/r.s"):
        topology = parse_url(url)
        assert topology.shape == "single" and topology.url == url and not topology.sharded


def test_a_sentinel_url_names_every_sentinel_the_master_and_the_database() -> None:
    topology = parse_url("redis+sentinel://app:s%40cret@s1:26379,s2,[::1]:26380/mymaster/3")
    assert topology.shape == "sentinel" and topology.master == "mymaster" and topology.db == 3
    assert topology.nodes == (("s1", 26379), ("s2", 26379), ("::1", 26380))
    assert (topology.username, topology.password, topology.tls) == ("app", "s@cret", False)
    assert parse_url("rediss+sentinel://s1/m").tls is True


def test_a_cluster_url_lists_seed_nodes_and_shards_doorbells() -> None:
    topology = parse_url("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2")
    assert topology.shape == "cluster" and topology.sharded
    assert topology.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 6379))
    assert topology.password == "pw" and topology.username is None


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://localhost", "unsupported Redis URL scheme 'http'"),
        ("redis+sentinel://s1:26379", "without a master name"),
        ("redis+cluster://n1:7000/1", "database 0 only"),
        ("redis+cluster://n1:port", "invalid port"),
        ("redis+sentinel://s1,,s2/m", "empty host"),
        ("redis+sentinel://s1/m/x", "invalid database number 'x'"),
        ("unix+cluster:///tmp/s", "reached by TCP"),
    ],
)
def test_a_wrong_url_says_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("+", r"\+")):
        parse_url(url)


def test_masking_hides_the_password_of_every_shape() -> None:
    assert mask_url("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert mask_url("redis+sentinel://u:pw@s1:1,s2:2/m") == "redis+sentinel://u:***@s1:1,s2:2/m"
    assert mask_url("redis+cluster://n1:1,n2:2") == "redis+cluster://n1:1,n2:2"
    assert mask_url("redis://h/0?password=pw") == "redis://h/0?password=***"
