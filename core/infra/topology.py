"""What a probe says of Redis: its shape, the queue's primary, replicas in sync, slot coverage."""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool

from core.infra.redis_client import RedisClient, target_of

CLUSTER_SLOTS = 16_384


def replicas_in_sync(replication: dict[str, Any]) -> int:
    """Replicas streaming from a primary, from its INFO replication."""
    return sum(
        1
        for name, value in replication.items()
        if name.startswith("slave") and isinstance(value, dict) and value.get("state") == "online"
    )


async def report(client: RedisClient, key: str) -> dict[str, Any]:
    """The deployment behind `client`, seen from the node holding `key` (the queue's slot)."""
    target = await target_of(client, key)
    replication: dict[str, Any] = await client.info("replication", **target)
    out: dict[str, Any] = {
        "shape": "single",
        "primary": None,
        "role": replication.get("role"),
        "replicas_in_sync": replicas_in_sync(replication),
    }
    if isinstance(client, RedisCluster):
        node = target["target_nodes"]
        info: dict[str, Any] = await client.cluster_info(target_nodes=node)
        out |= {
            "shape": "cluster",
            "primary": f"{node.host}:{node.port}",
            "cluster_state": info.get("cluster_state"),
            "slots_ok": int(info.get("cluster_slots_ok", 0)),
            "slots_covered": int(info.get("cluster_slots_ok", 0)) == CLUSTER_SLOTS,
            "masters": int(info.get("cluster_size", 0)),
        }
        return out
    pool = client.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        host, port = await pool.get_master_address()  # type: ignore[no-untyped-call]
        out |= {"shape": "sentinel", "primary": f"{host}:{port}", "master_name": pool.service_name}
        return out
    kwargs = pool.connection_kwargs
    out["primary"] = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
    return out
