"""The sections of a worker's settings: its timings and name, the engine it loads, ChatTTS's own
knobs, and what it hears in each segment (core/infra/sections.py gathers every section)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Literal


def worker_name(pid: int) -> str:
    """A worker's name unless CHATTTS_WORKER_NAME gives one: its host and process id."""
    return f"{socket.gethostname()}-{pid}"


# ChatTTS's decode paths: our runtime, or its own `infer`.
RuntimeName = Literal["ours", "library"]


@dataclass(frozen=True)
class WorkerSettings:
    """A worker's timings and name. block_ms stays well below redis-py's 5 s socket timeout."""

    block_ms: int = 1_000
    lease_ms: int = 30_000
    reclaim_interval_ms: int = 5_000
    heartbeat_s: float = 5.0
    max_deliveries: int = 3
    shutdown_grace_s: float = 30.0
    retry_backoff_ms: int = 500
    worker_name: str = field(default_factory=lambda: worker_name(os.getpid()))
    # A worker serves Prometheus /metrics on this port (0: off). `run` gives worker i port+i-1.
    worker_metrics_port: int = 9091


@dataclass(frozen=True)
class EngineSettings:
    """The engine a worker loads, where, and how many segments it makes at once (each engine's
    own knobs in a section of its own)."""

    name: str = field(default="auto", metadata={"env": "ENGINE"})  # workers/engines: ENGINES
    device: str = "auto"
    model_dir: str | None = None
    max_batch: int = 8
    batch_wait_ms: int = 20


@dataclass(frozen=True)
class ChatTTSSettings:
    """ChatTTS's own knobs (workers/engines/chattts/): its decode runtime, streamed chunks and
    weights. Its slots are the engine's `max_batch`."""

    # Its decode runtime (workers/engines/chattts/runtime/), "ours", or "library" for ChatTTS's
    # own `infer` (the benchmarks' "before").
    compile: bool = False
    runtime: RuntimeName = "ours"
    context: int = 0  # positions per slot; 0: the audio budget plus room for a prompt
    stream_tokens: int = 24  # audio tokens per streamed chunk: about half a second
    first_chunk_tokens: int = 0  # the first chunk's tokens; 0: 8 (a sixth of a second)
    lookahead_tokens: int = -1  # right context before a chunk leaves; -1: 16 on CUDA, 8 on CPU
    # Transformer weights and cache: auto (bfloat16 on CUDA and CPUs that multiply it natively).
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"


@dataclass(frozen=True)
class CheckSettings:
    """What a worker hears in each segment it made (workers/checks/): the recognizer, and how
    many attempts a segment that fails gets."""

    # "auto" (pocketsphinx where installed), "none", "pocketsphinx", or the URL of an
    # OpenAI-style transcription server (http://host:8000/v1/audio/transcriptions).
    recognizer: str = "auto"
    recognizer_model: str = "whisper-1"  # the `model` a transcription server is asked for
    recognizer_key: str | None = None  # its API key, if it wants one
    recognizer_timeout_s: float = 10.0  # past this, a segment is unheard
    # pocketsphinx's processes per worker, hearing segments side by side (about a core each).
    recognizer_processes: int = 1
    # Attempts of a segment in all, the first among them (1: checked and told, never made again).
    check_tries: int = 2
    # Candidates of a segment made at once (each with its own seed), the best kept.
    check_candidates: int = 1
    # A streamed job's segments: "send" at once and tell their verdicts after (the job's file
    # then holds a remade segment), or "hold" each until it is checked. Per request:
    # `stream_check`.
    check_streams: Literal["send", "hold"] = "send"
    # Segments waiting for the recognizer beyond this are unheard at once.
    check_pending: int = 64
