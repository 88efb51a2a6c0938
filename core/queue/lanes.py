"""Where a job waits under the fair scheduler: its lane, the client it is fair to, its weight and
its cost (lua/take.lua serves them)."""

from __future__ import annotations

from dataclasses import dataclass

from core.audio.sizes import speech_seconds
from core.infra.settings import Settings
from core.queue.job import SynthesisRequest

# Streams wait apart from other interactive work: a worker takes them only while it carries
# every stream it has in real time (CHATTTS_STREAM_ADMISSION), and they go first when it can.
INTERACTIVE, BULK, STREAM = "i", "b", "s"
# A job's cost is at least this (seconds of speech): a flood of one-character jobs still pays.
MIN_COST_S = 0.1


@dataclass(frozen=True)
class KeyShare:
    """An API key's place among the others (CHATTTS_KEY_WEIGHTS)."""

    weight: float = 1.0
    bulk: bool = False  # every job of the key waits in the bulk lane


@dataclass(frozen=True)
class Placement:
    lane: str  # INTERACTIVE | BULK | STREAM
    who: str  # the fair share's owner: an API key's client, or a cookie client's address
    weight: float
    cost: float  # estimated seconds of speech


def place(
    settings: Settings,
    request: SynthesisRequest,
    client: str,
    source: str | None,
    document: bool,
    share: KeyShare | None = None,
) -> Placement:
    """Bulk: documents, jobs that ask for it, jobs past CHATTTS_INTERACTIVE_MAX_S of speech
    (unless streamed), and every job of a key of the bulk class; stream: the other streamed
    jobs up to CHATTTS_INTERACTIVE_MAX_S (past it a stream waits its turn among interactive
    work: long ones would otherwise all go before everyone's short jobs); interactive: the
    rest (OpenAI speech, short jobs). Clients without a key share their address's share: fresh
    cookies gain nothing."""
    share = share or KeyShare()
    cost = max(MIN_COST_S, speech_seconds(request.text))
    bulk = document or share.bulk or request.priority == "bulk"
    bulk = bulk or (cost > settings.scheduling.interactive_max_s and not request.stream)
    keyed = client.startswith("key-")
    who = client if keyed or not source else f"address:{source}"
    first = request.stream and cost <= settings.scheduling.interactive_max_s
    lane = BULK if bulk else STREAM if first else INTERACTIVE
    return Placement(lane, who, share.weight if keyed else 1.0, cost)
