"""Each segment an engine makes is heard before it counts (workers/checks/): a verdict per
attempt, and another attempt with another seed while it fails and tries remain; the best one is
kept. What a job's stream gets, and when, is the request's `stream_check`."""

from __future__ import annotations

import dataclasses

import numpy as np

from core.infra.worker_sections import CheckSettings
from workers.checks.checker import Checker
from workers.checks.faults import AudioFaults
from workers.checks.verdict import Verdict
from workers.engines.base import Segment, SegmentResult
from workers.jobs import ActiveJob, Tries

_SEED_SPACE = 2**31 - 1


class Hearing:
    def __init__(
        self,
        checker: Checker,
        settings: CheckSettings,
        rate: int,
        faults: AudioFaults | None = None,
    ) -> None:
        self.checker, self.rate, self.faults = checker, rate, faults
        self.candidates = max(1, settings.check_candidates)
        self.tries = max(settings.check_tries, self.candidates)
        self.stream_policy = settings.check_streams

    def holds(self, job: ActiveJob) -> bool:
        """A streamed job whose segments wait for their verdicts before they go out."""
        request = job.started.request
        return request.stream and (request.stream_check or self.stream_policy) == "hold"

    def first(self, job: ActiveJob, segment: Segment, streamed: bool) -> list[Segment]:
        """The attempts of a segment to make at once: the segment, and its other candidates
        where the job is not streamed (a stream plays its first)."""
        count = 1 if streamed else self.candidates
        tries = job.tries.setdefault(segment.index, Tries())
        attempts = [self._attempt(segment, k) for k in range(count)]
        tries.made += count
        return attempts

    def again(self, job: ActiveJob, index: int) -> Segment | None:
        """The next attempt of a segment whose attempts so far failed (None: no tries left, or
        its best did not fail)."""
        tries = job.tries[index]
        if tries.heard < tries.made or tries.made >= self.tries:
            return None  # its other candidates are still out, or it had its tries
        if tries.best is None or tries.best[2].state != "failed":
            return None
        attempt = self._attempt(job.segment(index), tries.made)
        tries.made += 1
        return attempt

    async def hear(self, job: ActiveJob, segment: Segment, result: SegmentResult) -> Verdict:
        samples = result.audio
        if self.faults is not None:
            samples = self.faults.audio(samples, self.rate, segment.attempt)
        text = job.segments[segment.index]
        request = segment.request
        verdict = await self.checker.check(
            samples, self.rate, text, request.speed, result.truncated, request.voice
        )
        job.tries[segment.index].heard_one(segment, samples, verdict)
        return verdict

    def unheard(self, job: ActiveJob, segment: Segment, result: SegmentResult, why: str) -> Verdict:
        verdict = Verdict("unheard", unheard=why)
        job.tries[segment.index].heard_one(segment, result.audio, verdict)
        return verdict

    def settled(self, job: ActiveJob, index: int) -> tuple[Segment, np.ndarray, Verdict] | None:
        """The attempt a segment keeps once every attempt made is heard and none is due (None:
        wait); its verdict counts the attempts."""
        tries = job.tries[index]
        if tries.heard < tries.made or tries.best is None:
            return None
        segment, samples, verdict = tries.best
        del job.tries[index]
        return segment, samples, dataclasses.replace(verdict, attempts=tries.made)

    def _attempt(self, segment: Segment, attempt: int) -> Segment:
        text = self.faults.text(segment.text, attempt) if self.faults else segment.text
        if attempt == 0 and text == segment.text:
            return segment
        request = segment.request
        if attempt:  # another seed: the same one would make the same audio
            seed = request.seed
            derived = None if seed is None else (seed * 1_000_003 + attempt) % _SEED_SPACE
            request = request.model_copy(update={"seed": derived})
        return dataclasses.replace(segment, text=text, request=request, attempt=attempt, words=[])
