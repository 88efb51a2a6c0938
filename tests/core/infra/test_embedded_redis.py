"""The embedded Redis is locked down as if the machine were shared."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import redis

from core.infra.embedded_redis import EmbeddedRedis


def test_password_private_directory_no_config_and_a_memory_cap(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "redis", maxmemory="64mb") as server:
        assert stat.S_IMODE((tmp_path / "redis").stat().st_mode) == 0o700
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=server.port).ping()
        client = redis.Redis.from_url(server.url)
        try:
            assert client.ping()
            with pytest.raises(redis.ResponseError, match="unknown command"):
                client.execute_command("CONFIG", "SET", "dir", "/tmp")
            info = client.info("memory")
            assert info["maxmemory"] == 64 * 1024 * 1024
            assert info["maxmemory_policy"] == "noeviction"
        finally:
            client.close()
