"""Typed keys of everything the web application and its requests keep: one module, no strings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from redis.asyncio import Redis

from workers.keys import Keys
from workers.queue import Queue
from workers.settings import Settings

if TYPE_CHECKING:
    from .hub import Connections, EventHub
    from .throughput import ThroughputMeter
    from .views.metrics import Metrics

SETTINGS = web.AppKey("settings", Settings)
KEYS = web.AppKey("keys", Keys)
REDIS = web.AppKey("redis", Redis)
QUEUE = web.AppKey("queue", Queue)
HUB: web.AppKey[EventHub] = web.AppKey("hub")
CONNECTIONS: web.AppKey[Connections] = web.AppKey("connections")
METRICS: web.AppKey[Metrics] = web.AppKey("metrics")
THROUGHPUT: web.AppKey[ThroughputMeter] = web.AppKey("throughput")

# Per request: the client identity (computed once) and the fresh cookie token to set, if any.
CLIENT = web.RequestKey("client", str)
NEW_COOKIE = web.RequestKey("new_cookie", str)
