"""A listener that plays at 1x from its first piece of audio: how long it had nothing to play."""

from __future__ import annotations


def underrun(arrivals: list[tuple[float, float]]) -> float:
    """Seconds a 1x player that starts at the first piece had nothing to play (it waits for the
    next piece, then plays on): `arrivals` are (time, seconds of audio), in order."""
    if not arrivals:
        return 0.0
    stalled, (last, buffer) = 0.0, arrivals[0]
    for at, seconds in arrivals[1:]:
        elapsed = at - last
        if buffer >= elapsed:
            buffer -= elapsed
        else:
            stalled += elapsed - buffer
            buffer = 0.0
        buffer += seconds
        last = at
    return stalled
