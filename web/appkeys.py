"""Typed keys of everything the web application and its requests keep: one module, no strings.

It sits below every handler and middleware, and above the resources it types (the event hub, the
throughput meter, the metrics registry), which therefore never import it.
"""

from __future__ import annotations

from aiohttp import web

from core.audio.isolated import CodecProcess
from core.infra.settings import Settings
from core.queue.lanes import KeyShare
from core.queue.store import Queue
from web.derived import DerivedFiles
from web.hub import Connections, EventHub
from web.metrics import Metrics
from web.monitors.egress import EgressPacer
from web.monitors.memory import MemoryBudget
from web.monitors.store import ThroughputMeter

SETTINGS = web.AppKey("settings", Settings)
QUEUE = web.AppKey("queue", Queue)
HUB = web.AppKey("hub", EventHub)
CONNECTIONS = web.AppKey("connections", Connections)
METRICS = web.AppKey("metrics", Metrics)
THROUGHPUT = web.AppKey("throughput", ThroughputMeter)
MEMORY = web.AppKey("memory", MemoryBudget)
EGRESS = web.AppKey("egress", EgressPacer)
# Subtitles, captions' words and the API document, made once and kept (web/derived.py).
DERIVED = web.AppKey("derived", DerivedFiles)
# PCM encoded per address and second for streamed answers (web/views/compat/openai.py).
ENCODING = web.AppKey("encoding", EgressPacer)
# The child process native codecs run in: a document's parts encoded, recordings decoded.
CODECS = web.AppKey("codecs", CodecProcess)
# The key that signs identity cookies (web/clients/identity.py): a client cannot mint an identity.
COOKIE_SECRET = web.AppKey("cookie_secret", bytes)
# The key each client's callback signing secret derives from (web/callbacks/signing.py).
CALLBACK_SECRET = web.AppKey("callback_secret", bytes)

# Addresses that sent a wrong key lately, until when (web/clients/key_guesses.py).
SUSPECTS = web.AppKey("key_suspects", dict[str, float])

# API keys' shares under the fair scheduler (CHATTTS_KEY_WEIGHTS), by client id.
KEY_SHARES = web.AppKey("key_shares", dict[str, KeyShare])

# Per request: the client identity (computed once) and the fresh cookie token to set, if any.
CLIENT = web.RequestKey("client", str)
NEW_COOKIE = web.RequestKey("new_cookie", str)
# The cookie (or X-Client-Token) client_id verified for this request, if any.
CLIENT_TOKEN = web.RequestKey("client_token", str)
# The console session this request carries was signed out (web/clients/key_guesses.py).
SESSION_REVOKED = web.RequestKey("session_revoked", bool)
# The client's connection is TLS, as a trusted proxy says (web/middlewares/forwarded.py); the
# response hooks see the request as it arrived, not the forwarded clone.
FORWARDED_TLS = web.RequestKey("forwarded_tls", bool)
