"""The limits benchmarks and load tests turn off: they measure the machinery, not the limits
that guard it."""

from __future__ import annotations

LIMITS_OFF: dict[str, float] = {
    "submit_rate_per_client": 0,
    "submit_rate_per_address": 0,
    "streams_per_client": 0,
    "streams_per_address": 0,
    "connections_per_address": 0,
    "send_rate_per_address_bytes": 0,
    "encode_rate_per_address_bytes": 0,
}
