"""ElevenLabs' requests read as ours (its sockets' and its HTTP API's): a voice id that is one of
ours, else our default voice of the text's language; one seed per voice id; its voice settings'
speed."""

from __future__ import annotations

import hashlib
from typing import Any

from core.queue.job import MAX_SEED
from core.queue.store import Queue
from web.errors import ApiError
from web.intake.submissions import check_voice
from web.schemas.openai import OUR_SPEED


async def voice_of(queue: Queue, voice_id: str, client: str) -> str | None:
    """The path's voice if it is one of ours (or of this client's); else None: ElevenLabs'
    voice ids, which agents carry, read with our default voice of the text's language."""
    try:
        await check_voice(queue, voice_id, client)
    except ApiError:
        return None
    return voice_id


def seed_of(voice_id: str) -> int:
    """One seed per voice id: an agent's turns, and its connections, sound alike."""
    return int.from_bytes(hashlib.sha256(voice_id.encode()).digest()[:4], "big") % MAX_SEED


def speed_of(voice_settings: Any) -> float | None:
    """`voice_settings.speed`, within our range (None: not given, or not a positive number)."""
    speed = voice_settings.get("speed") if isinstance(voice_settings, dict) else None
    if isinstance(speed, int | float) and not isinstance(speed, bool) and speed > 0:
        return min(max(float(speed), OUR_SPEED[0]), OUR_SPEED[1])
    return None
