"""The settings' sections, one frozen dataclass per tier, with their defaults and what is derived
from them (a worker's are in worker_sections.py; core/infra/settings.py gathers them all)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Literal

from core.infra.networks import Network, parse_networks


def _csv(text: str) -> frozenset[str]:
    return frozenset(item.strip() for item in text.split(",") if item.strip())


@dataclass(frozen=True)
class RedisSettings:
    """Where the queue lives, and how long it keeps what it holds."""

    # None means "start an embedded server" (only `chattts-online run` does that).
    redis_url: str | None = None  # redis://, rediss://, redis+sentinel://, redis+cluster://
    redis_sentinel_password: str = ""  # the sentinels' own, when they have one
    # Replicas that must hold a job before its submission is answered 202 (Redis WAIT): with 1,
    # an accepted job survives the loss of the primary. 0: answer once the primary has it.
    redis_min_replicas: int = 0
    # How long a submission waits for them; a replica on the same network acks in a millisecond.
    redis_replica_wait_ms: int = 500
    queue: str = "main"
    key_prefix: str = "tts"
    # A day: long enough to download a result the next morning, short enough to bound memory.
    job_ttl_s: int = 86_400
    # A job cancelled before it ran has no audio to fetch: its record and events go soon, so
    # that submit-then-cancel cannot fill Redis for a day.
    unstarted_ttl_s: int = 600
    # Events: enough history to replay one job fully, and a tab's recent jobs.
    job_events_maxlen: int = 256
    client_events_maxlen: int = 2_000


@dataclass(frozen=True)
class StoreSettings:
    """Where finished audio and cached results live."""

    # file:///path is a directory (local, or a volume every web and worker host mounts);
    # "redis" (or "" outside `run`) keeps them in Redis. `chattts-online run` picks
    # file://<data dir>/audio.
    audio_store: str = ""
    # How long a finished job waits for the store to take its file (retried, its lease renewed)
    # before it fails with the store's error: a full or dead store must not wedge the workers.
    audio_store_timeout_s: float = 30.0
    # Seconds a download link into the store stays valid when the web tier redirects downloads
    # there (307 to a presigned URL: the bytes bypass the web tier); 0 serves them itself. For
    # stores that sign URLs (S3); a document's file is joined from its parts and always served.
    audio_store_redirect_s: int = 0


@dataclass(frozen=True)
class LimitSettings:
    """What one request, client or source address may take (read by the web tier)."""

    max_text_chars: int = 4_000
    # POST /v1/tts/jobs takes whole documents up to this (about 4 hours of speech): kept in
    # parts, resumed after a crash where it stopped (core/audio/documents.py).
    max_document_chars: int = 200_000
    # A JSON job request is small; voice registration with a reference clip needs more room.
    max_body_bytes: int = 2 * 1024 * 1024
    max_backlog: int = 10_000
    # Jobs one API key, or one source address with all its cookies, may have waiting or running
    # at once (0: no limit): at most a quarter of the backlog, and less while others wait (the
    # backlog over the owners waiting plus one: core/queue/lua/enqueue.lua).
    max_backlog_per_owner: int = 2_500
    max_active_per_client: int = 200
    # Audio a client may keep at once (its jobs' expected bytes, until they expire; 0: no
    # limit): one client cannot fill the store for everyone. 4 GiB is about 25 hours of WAV
    # (the longest document, in Mandarin, fits once), 75 of MP3.
    storage_per_client_bytes: int = 4 * 1024**3
    # The same for every client of one source address together (a fresh cookie is a fresh
    # client): four clients' worth.
    storage_per_address_bytes: int = 16 * 1024**3
    # Bytes streamed jobs keep in Redis at once as chunks (their PCM, until a while after each
    # ends; 0: no limit), at most half of it per client and per address. The web tier admits a
    # stream against it, and against a quarter of Redis's maxmemory where that is smaller.
    # 256 MiB is about 90 minutes of streamed speech.
    stream_chunk_bytes: int = 256 * 1024**2
    # Rate limits and caps, per client (cookie or key) and per source address (0: off). A person
    # clicking is far below; a script pacing itself too; a flood is refused with 429.
    submit_rate_per_client: float = 5.0  # submissions per second, on average...
    submit_burst_per_client: int = 30  # ... and at once
    submit_rate_per_address: float = 20.0  # an address mints identities by dropping cookies
    submit_burst_per_address: int = 100
    streams_per_client: int = 16  # SSE streams and WebSockets open at once (tabs, scripts)
    streams_per_address: int = 128
    # TCP connections one web process holds open from one source address (0: no cap), counted
    # at accept, before a byte is read: twice its streams, with room for keep-alive requests.
    # A trusted proxy's own address is not capped (CHATTTS_TRUSTED_PROXIES).
    connections_per_address: int = 256
    # Seconds a request's line and headers may take to arrive, from its first byte (or from
    # the connection's opening): a client that trickles them is cut off.
    header_timeout_s: float = 20.0
    ws_subscriptions: int = 32  # job subscriptions per WebSocket (each one follows a stream)
    # Live sessions (text in as it is written, audio out from the first sentence): characters
    # per text message and per context over its life, text received but not yet spoken per
    # context (an LLM writes faster than speech: past it, wait for audio), contexts per
    # connection, live connections per client and per source address, and seconds a context
    # may stay silent (no text, no audio) or a connection stay open at all.
    live_message_chars: int = 5_000
    live_context_chars: int = 200_000
    live_pending_chars: int = 20_000
    live_contexts: int = 8
    live_sessions_per_client: int = 4
    live_sessions_per_address: int = 32
    live_idle_s: float = 20.0
    live_max_s: float = 3_600.0
    # "client": a result answers only the client that asked for it first (an instant answer
    # would tell another client what someone submitted); "global": any client (clients that
    # trust each other, e.g. one application behind one key, share more hits).
    cache_scope: Literal["client", "global"] = "client"
    # Bytes one web process holds for requests in flight (bodies being read, audio being sent),
    # in all and per source address: clients that never read or never finish sending are
    # refused (503 busy, 429 too_much_in_flight) before they take the process's memory.
    web_memory_bytes: int = 256 * 1024**2
    web_memory_per_address_bytes: int = 64 * 1024**2
    # Bytes a second one web process sends one source address (downloads, streams, replays;
    # 0: off): re-fetching large files cannot take the process's CPU from everyone. 16 MiB/s
    # is 128 Mbit/s, a 4-hour WAV in 45 s; a real-time stream takes 48 KB/s.
    send_rate_per_address_bytes: int = 16 * 1024**2
    # PCM a second one web process encodes for one source address's streamed OpenAI answers in
    # compressed formats (mp3, opus, aac, flac; 0: off): encoding costs about 1 CPU-second per
    # 80 s of audio, and a cached answer would otherwise be encoded whole at once, as often as it
    # is asked for. 2 MiB/s is 44 s of audio a second, far ahead of any listener.
    encode_rate_per_address_bytes: int = 2 * 1024**2
    voices_per_owner: int = 20
    # A fresh cookie is a fresh owner: voices from one source address, whoever owns them.
    voices_per_address: int = 60
    voice_bytes_per_owner: int = 32 * 1024 * 1024
    voice_bytes_per_address: int = 96 * 1024 * 1024  # three owners' worth, as the count
    # Registered voices' bytes in all (they live in Redis; 0: no limit): a fifth of the embedded
    # Redis's maxmemory, so that minting addresses cannot fill it with voices.
    voice_bytes_total: int = 200 * 1024 * 1024


@dataclass(frozen=True)
class SchedulingSettings:
    """Who goes first (core/queue/lua/take.lua), and how many streams a worker runs."""

    # "fair": jobs wait per client in two lanes, interactive and bulk, and are taken by weighted
    # fair queuing over estimated seconds of speech; "fifo": in the order they came (interactive
    # "high" jobs first). Set the same on every web process (it decides where a job waits);
    # workers take from both.
    scheduler: Literal["fair", "fifo"] = "fair"
    # Seconds of speech a document makes before it gives its worker back when another
    # client's work waits (it resumes after its stored parts): about one segment, so that a
    # backlog delays another client by one segment's synthesis per worker, not by its length.
    fair_slice_s: float = 5.0
    # The share of the workers bulk work keeps while interactive work waits too (documents,
    # "priority": "bulk", long jobs, keys of the bulk class): never starved, and all the rest
    # when interactive work leaves room.
    bulk_min_share: float = 0.2
    # A job expected to make more speech than this waits in the bulk lane.
    interactive_max_s: float = 30.0
    # Shares of API keys against the others' 1 ("key=4,other=2:bulk"; ":bulk" puts every job
    # of the key in the bulk lane). Clients without a key share their address's one share.
    key_weights: str = ""
    # Streams a worker takes and runs at once: "capacity", as many as it measures it can carry
    # with every listener ahead of its playback (the rest wait in the stream lane, their first
    # audio later, and no running stream is slowed down); "off": as many as it has room for.
    stream_admission: Literal["capacity", "off"] = "capacity"
    # How much faster than real time a stream must be made to count as carried: the margin
    # that keeps its listener ahead through a slow step, a prefill, a segment's start, and
    # the listeners' own sending (on a small CPU, bench.players: at 1.25 one run in three had
    # 24 of 30 streams gap at the capacity; at 1.5, 9 of 116 over six runs).
    stream_headroom: float = 1.5
    # Streams one worker carries, when the operator knows it; 0: measured as it runs.
    stream_capacity: int = 0

    def __post_init__(self) -> None:
        _ = self.key_weight_map  # a bad weight stops every process at its start, named

    @functools.cached_property
    def key_weight_map(self) -> dict[str, tuple[float, bool]]:
        """CHATTTS_KEY_WEIGHTS by key: (weight, bulk class)."""
        out: dict[str, tuple[float, bool]] = {}
        for n, item in enumerate((i.strip() for i in self.key_weights.split(",")), 1):
            if not item:
                continue
            key, sep, rest = item.rpartition("=")
            weight, _, klass = rest.partition(":")
            try:
                value = float(weight)
            except ValueError:
                value = 0.0
            positive = math.isfinite(value) and value > 0  # nan and inf would wedge take.lua
            if not sep or not key or not positive or klass not in ("", "bulk", "interactive"):
                raise ValueError(  # not the entry itself: it holds a key
                    f"CHATTTS_KEY_WEIGHTS: entry {n} is not key=weight or key=weight:bulk "
                    "(a positive weight)"
                )
            out[key] = (value, klass == "bulk")
        return out


@dataclass(frozen=True)
class WebSettings:
    """The web tier: where it listens, who it trusts, how it streams."""

    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: str = ""
    # Keys of operators: accepted as API keys, and their holder may cancel any job, delete any
    # voice and sees every voice listed.
    admin_keys: str = ""
    # Peers (CIDRs, or *) that read /metrics and /readyz's detail: loopback unless named (the
    # scrapers' network: a deployment's manifests name their pod or compose network); anyone
    # else gets 403 from /metrics and only the ready/not-ready answer from /readyz. Not every
    # private range by default: clients on a LAN are private addresses too.
    metrics_networks: str = "127.0.0.0/8,::1/128"
    # With keys set, /metrics and /readyz need one too (Prometheus sends it: `authorization`);
    # off by default, for probes and scrapers that cannot send a header.
    private_metrics: bool = False
    # With API keys set, the lists OpenAI-style front ends probe without a key (models, voices:
    # /v1/models, /v1/audio/voices, /v1/audio/models) need one too; off by default, as Open WebUI
    # probes them without its key and falls back to OpenAI's voices.
    discovery_needs_key: bool = False
    # The reverse proxies (CIDRs) whose X-Forwarded-For and X-Forwarded-Proto are believed:
    # limits then count the client's address, and cookies are Secure behind TLS. Empty: the
    # peer is the client (behind a proxy every client then shares the proxy's address).
    trusted_proxies: str = ""
    # Signs identity cookies; empty: a secret generated into data_dir. Replicas must share one.
    cookie_secret: str = ""
    # Origins (comma-separated) whose pages may use the API from a browser: change state, open
    # the WebSocket, read answers with the identity cookie (CORS); `*`: any page, without
    # credentials. Empty: only the service's own page.
    allowed_origins: str = ""
    # Host names answered (comma-separated, or *); empty: loopback names only when bound to
    # loopback (no DNS rebinding), any when bound to a public address.
    allowed_hosts: str = ""
    # The service's address as receivers reach it, for the audio URLs in callbacks; empty: this
    # process's own http://host:port.
    public_url: str = ""
    sse_ping_s: float = 15.0
    # Per SSE/WS connection: a client this far behind is disconnected (it resumes by cursor).
    connection_queue_size: int = 256
    # Waiting jobs above this: a warning log, chattts_backlog_alert = 1, a readiness detail.
    # Half the default cap: an operator hears about it well before submits get 429.
    backlog_alert: int = 5_000

    def __post_init__(self) -> None:
        _ = self.metrics_peers, self.proxy_networks  # a bad entry stops the start, named

    @functools.cached_property
    def metrics_peers(self) -> tuple[Network, ...] | None:
        """CHATTTS_METRICS_NETWORKS parsed; None: `*`, every peer."""
        if self.metrics_networks.strip() == "*":
            return None
        return parse_networks(self.metrics_networks, "CHATTTS_METRICS_NETWORKS")

    @functools.cached_property
    def proxy_networks(self) -> tuple[Network, ...]:
        """CHATTTS_TRUSTED_PROXIES parsed."""
        return parse_networks(self.trusted_proxies, "CHATTTS_TRUSTED_PROXIES")

    @functools.cached_property  # read on every request
    def admin_key_set(self) -> frozenset[str]:
        return _csv(self.admin_keys)

    @functools.cached_property  # read on every request
    def user_key_set(self) -> frozenset[str]:
        """The API keys: with any, every API request needs a key (an admin key will do)."""
        return _csv(self.api_keys)

    @functools.cached_property  # read on every request
    def api_key_set(self) -> frozenset[str]:
        """Every accepted key: the API keys and the admin keys (admin keys alone leave the API
        open to clients without a key, and open the operators' console)."""
        return self.user_key_set | self.admin_key_set


@dataclass(frozen=True)
class CallbackSettings:
    """Callbacks (webhooks, Standard Webhooks): a job's `callback_url` is POSTed when it ends."""

    # Web processes deliver them (any number: each attempt goes once).
    enabled: bool = field(default=True, metadata={"env": "CALLBACKS"})
    # Signs them (each client gets its own secret derived from it: GET /v1/callbacks/secret);
    # empty: derived from the cookie secret, which every replica shares already.
    callback_secret: str = ""
    # Private addresses callbacks may still reach (comma-separated CIDRs, e.g. 10.0.0.0/8):
    # by default only public ones, so that a job cannot make the service call into its network.
    callback_allow: str = ""
    callback_timeout_s: float = 5.0  # an answer slower than this is a failed attempt
    # Pauses before each retry (Standard Webhooks' schedule, less its last 10 h): about 17 h of
    # trying, within the day a job is kept.
    callback_schedule_s: str = "5,300,1800,7200,18000,36000"

    def __post_init__(self) -> None:
        _ = self.allow_networks, self.schedule  # a bad entry stops the start, named

    @functools.cached_property
    def allow_networks(self) -> tuple[Network, ...]:
        """CHATTTS_CALLBACK_ALLOW parsed."""
        return parse_networks(self.callback_allow, "CHATTTS_CALLBACK_ALLOW")

    @functools.cached_property
    def schedule(self) -> tuple[float, ...]:
        """CHATTTS_CALLBACK_SCHEDULE_S: the pauses before each retry, in seconds."""
        text = self.callback_schedule_s
        try:
            pauses = tuple(float(p) for p in text.split(",") if p.strip())
        except ValueError:
            raise ValueError(
                f"CHATTTS_CALLBACK_SCHEDULE_S={text!r}: seconds, comma-separated"
            ) from None
        if not all(math.isfinite(p) and p >= 0 for p in pauses):
            raise ValueError("CHATTTS_CALLBACK_SCHEDULE_S: pauses cannot be negative")
        return pauses
