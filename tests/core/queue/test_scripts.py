"""The queue's scripts as loaded (core/queue/scripts.py), on a real Redis: each compiles, takes its
keys and arguments by name, refuses a call that misses one, and builds its key names from
keys.py's definitions, never by hand."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from redis.asyncio import Redis

from core.queue import scripts
from core.queue.keys import Keys

LUA = resources.files("core.queue") / "lua"
NAMES = sorted(p.name[:-4] for p in LUA.iterdir() if p.name.endswith(".lua") and p.name[0] != "_")


@pytest.mark.parametrize("name", NAMES)
async def test_every_script_compiles_with_its_names_and_no_positions(
    aredis: Redis, name: str
) -> None:
    body = (LUA / f"{name}.lua").read_text()
    assert not re.search(r"\b(KEYS|ARGV)\[", body), "a script reads its names, not positions"
    assert not re.search(r"\.\. *':", body), "a key name comes from K (keys.py)"
    assert not re.search(r"\bK\.", scripts.source(name)), "every K call is written out"
    for sharded in (False, True):
        await aredis.script_load(scripts.source(name, sharded))


def test_the_prelude_builds_no_key_name_by_hand() -> None:
    prelude = (LUA / "_prelude.lua").read_text()
    assert not re.search(r"\.\. *':", prelude)


def test_a_key_is_keys_py_definition_written_out() -> None:
    assert scripts.expand_keys("local list = K.waiting(base, lane, who)") == (
        "local list = (base .. ':wait:' .. lane .. ':' .. who)"
    )
    assert scripts.expand_keys("K.fair(base)") == "(base .. ':fair')"
    nested = scripts.expand_keys("redis.call('DEL', K.job(base, tonumber(ids[1])), x)")
    assert nested == "redis.call('DEL', (base .. ':job:' .. (tonumber(ids[1]))), x)"
    with pytest.raises(ValueError, match="no such key"):
        scripts.expand_keys("K.nonsense(base)")
    with pytest.raises(ValueError, match="takes"):
        scripts.expand_keys("K.lane(base)")


async def test_a_script_called_by_name_gets_the_same_key_names_as_python(aredis: Redis) -> None:
    """`K.waiting(base, ...)` in a script is the key `Keys.waiting` names: a script that builds
    it and one that reads it agree with Python."""
    keys = Keys("scripts-test", "q")
    await aredis.delete(keys.waiting("i", "who-1"), keys.job("j-1"))
    await aredis.hset(keys.job("j-1"), mapping={"state": "queued", "lane": "i", "who": "who-1"})
    await aredis.rpush(keys.waiting("i", "who-1"), "j-0", "j-1")
    await aredis.zadd(keys.lane("i"), {"who-1": 0})
    await aredis.hset(keys.job("j-1"), "id", "j-1")
    position = scripts.Script(aredis, "position")
    assert await position(keys={"job": keys.job("j-1")}, args={}) == 1
    await aredis.delete(keys.waiting("i", "who-1"), keys.job("j-1"), keys.lane("i"))


def test_a_call_must_name_every_key_and_argument() -> None:
    renew = scripts.signature("renew")
    assert renew.keys == ("jobs", "job") and renew.args == ("token", "worker")
    assert renew.order({"jobs": "s", "job": "j"}, {"worker": "w", "token": "t"}) == (
        ["s", "j"],
        ["t", "w"],
    )
    with pytest.raises(TypeError):
        renew.order({"jobs": "s"}, {"token": "t", "worker": "w"})
    with pytest.raises(KeyError):
        renew.order({"jobs": "s", "jab": "j"}, {"token": "t", "worker": "w"})


def test_rest_lists_follow_the_named_ones() -> None:
    register = scripts.signature("voice_register")
    keys, args = register.order(
        {"voices": "v", "voice_data": "d", "accounts": ["a1", "a2"]},
        {"name": "n", "metadata": "m", "data": "x", "size": 3, "quotas": [1, 2, 3, 4]},
    )
    assert keys == ["v", "d", "a1", "a2"] and args == ["n", "m", "x", 3, 1, 2, 3, 4]


def test_names_that_clash_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        scripts.Signature.parse("bad", "--- keys: job\n--- args: job\n")
