"""Subtitles of a real job: SRT and WebVTT read back by their libraries and by FFmpeg (muxed with
the audio through PyAV), each cue within 20 ms of its segment in the final audio."""

from __future__ import annotations

import asyncio
import io
import itertools
import threading
import time
from typing import Any

import av
import soundfile as sf
import srt
import webvtt
from aiohttp.test_utils import TestClient

from core.text.cues import shown
from tests.conftest import ClientFactory, WorkerProcess
from web.appkeys import DERIVED

SENTENCES = [
    "The first sentence is long enough to be a segment of its own, as every sentence of this "
    "little test has to be.",
    "A second one follows it, just as long, so that the worker never merges the two of them "
    "into a single segment!",
    "And the third one ends the text, [uv_break] with a pause and a question that nobody will "
    "answer in the end?",
]
TOLERANCE_S = 0.020


async def finished(client: TestClient[Any, Any], body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/tts/jobs", json=body)
    assert response.status == 202, await response.text()
    job_id = (await response.json())["id"]
    deadline = time.monotonic() + 30
    while True:
        job: dict[str, Any] = await (await client.get(f"/v1/tts/jobs/{job_id}")).json()
        if job["state"] == "succeeded":
            return job
        assert job["state"] in ("queued", "running") and time.monotonic() < deadline, job
        await asyncio.sleep(0.05)


def vtt_seconds(timestamp: str) -> float:
    """webvtt-py's own `*_in_seconds` are whole seconds: its millisecond text, read here."""
    hours, minutes, rest = timestamp.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(rest)


def seconds(data: bytes) -> float:
    samples, rate = sf.read(io.BytesIO(data))
    return float(len(samples) / rate)


async def test_subtitles_are_timed_on_the_audio_and_read_by_every_tool(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    client = await make_client()
    text = " ".join(SENTENCES)
    job = await finished(client, {"text": text, "voice": "en_male"})
    job_id = job["id"]
    assert job["segments_total"] == len(SENTENCES)
    audio = await (await client.get(f"/v1/tts/jobs/{job_id}/audio")).read()
    segments = [
        seconds(await (await client.get(f"/v1/tts/jobs/{job_id}/segments/{n}")).read())
        for n in range(1, len(SENTENCES) + 1)
    ]
    expected, at = [], 0.0
    for i, duration in enumerate(segments):
        at += 0.12 if i else 0.0
        expected.append((at, at + duration))
        at += duration
    assert abs(at - seconds(audio)) < TOLERANCE_S

    srt_text = await (await client.get(f"/v1/tts/jobs/{job_id}/subtitles?format=srt")).text()
    parsed = list(srt.parse(srt_text))
    vtt = webvtt.from_string(
        await (await client.get(f"/v1/tts/jobs/{job_id}/subtitles?format=vtt")).text()
    )
    cues = (await (await client.get(f"/v1/tts/jobs/{job_id}/subtitles?format=json")).json())["cues"]
    assert len(parsed) == len(vtt.captions) == len(cues) > len(SENTENCES)  # long ones are cut
    for subtitle, caption, cue in zip(parsed, vtt.captions, cues, strict=True):
        assert abs(subtitle.start.total_seconds() - cue["start"]) < 0.0015
        assert abs(vtt_seconds(caption.end) - cue["end"]) < 0.0015
        assert subtitle.content == cue["text"] and "[uv_break]" not in cue["text"]
        # Subtitlers' conventions: two lines of 42 at most, 7 s at most.
        lines = cue["text"].split("\n")
        assert len(lines) <= 2 and all(len(line) <= 42 for line in lines), cue
        assert 0 < cue["end"] - cue["start"] <= 7.0, cue
        assert " ".join(lines) == " ".join(
            text[cue["from"] : cue["to"]].replace("[uv_break]", "").split()
        )
    # Each segment's cues cover its audio, in order, none overlapping, none past the end.
    for n, (start, end) in enumerate(expected, start=1):
        mine = [c for c in cues if c["segment"] == n]
        assert (
            abs(mine[0]["start"] - start) < TOLERANCE_S and abs(mine[-1]["end"] - end) < TOLERANCE_S
        )
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(cues))
    assert cues[-1]["end"] <= seconds(audio) + 0.001
    # Every character of the text (spaces aside) in exactly one cue, in order.
    assert all(a["to"] <= b["from"] for a, b in itertools.pairwise(cues))
    assert "".join(text[c["from"] : c["to"]] for c in cues).replace(" ", "") == text.replace(
        " ", ""
    )
    # eSpeak NG says when each word starts: the cue after "[uv_break]" starts where the pause
    # ends, the silence just before it in the audio.
    after_pause = next(c for c in cues if text[c["from"] :].startswith("[uv_break]"))
    samples, rate = sf.read(io.BytesIO(audio))
    at = round(after_pause["start"] * rate)
    assert float(abs(samples[at - rate // 10 : at - rate // 100]).max()) < 0.01
    assert float(abs(samples[at : at + rate // 5]).max()) > 0.05  # and the word after it
    timed = await (await client.get(f"{job['subtitles_url']}?format=json")).json()
    words = timed["words"]
    assert timed["words_estimated"] is False  # eSpeak NG said when each word starts
    assert " ".join(w["word"] for w in words) == " ".join(shown(text).split())
    assert all(w["start_time"] <= w["end_time"] for w in words)
    assert next(w for w in words if w["word"] == "with")["start_time"] == after_pause["start"]
    # FFmpeg reads the SRT as subtitles and muxes it with the audio into one file.
    muxed = io.BytesIO()
    with (
        av.open(io.BytesIO(audio)) as wav,
        av.open(io.BytesIO(srt_text.encode()), format="srt") as subs,
        av.open(muxed, "w", format="matroska") as out,
    ):
        audio_out = out.add_stream_from_template(wav.streams.audio[0])
        subs_out = out.add_stream_from_template(subs.streams.subtitles[0])
        for packet in wav.demux(wav.streams.audio[0]):
            if packet.size:
                packet.stream = audio_out
                out.mux(packet)
        for packet in subs.demux(subs.streams.subtitles[0]):
            if packet.size:
                packet.stream = subs_out
                out.mux(packet)
    muxed.seek(0)
    with av.open(muxed) as back:
        assert len(back.streams.audio) == 1 and len(back.streams.subtitles) == 1
        stream = back.streams.subtitles[0]
        starts = [
            float(p.pts * p.time_base) for p in back.demux(stream) if p.size and p.pts is not None
        ]
    assert len(starts) == len(cues)
    assert all(abs(s - c["start"]) < TOLERANCE_S for s, c in zip(starts, cues, strict=True))


async def test_a_one_segment_job_has_one_cue_over_its_audio(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    client = await make_client()
    job = await finished(client, {"text": "Just one sentence.", "voice": "en_female"})
    cues = (await (await client.get(f"{job['subtitles_url']}?format=json")).json())["cues"]
    audio = await (await client.get(job["audio_url"])).read()
    assert len(cues) == 1 and cues[0]["start"] == 0 and cues[0]["text"] == "Just one sentence."
    assert abs(cues[0]["end"] - seconds(audio)) < TOLERANCE_S
    # A result from the cache has its subtitles too.
    again = await finished(client, {"text": "Just one sentence.", "voice": "en_female", "seed": 1})
    again_twice = await finished(
        client, {"text": "Just one sentence.", "voice": "en_female", "seed": 1}
    )
    assert again_twice.get("cached") is True
    cached = await (await client.get(f"{again_twice['subtitles_url']}?format=json")).json()
    assert (
        cached["cues"][0]["end"]
        == (await (await client.get(f"{again['subtitles_url']}?format=json")).json())["cues"][0][
            "end"
        ]
    )


async def test_text_that_spells_the_formats_own_syntax_stays_text(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """ "-->" is WebVTT's timing arrow, "<" and "&" start its tags and references: a cue's text
    may hold all three and both formats still parse, with the words in them."""
    client = await make_client()
    text = "Step one --> step two, if a < b & c."
    job = await finished(client, {"text": text, "voice": "en_female"})
    answer = await client.get(f"{job['subtitles_url']}?format=vtt")
    assert answer.status == 200, await answer.text()
    (caption,) = webvtt.from_string(await answer.text()).captions
    assert caption.text == "Step one → step two, if a &lt; b &amp; c."
    (subtitle,) = srt.parse(await (await client.get(f"{job['subtitles_url']}?format=srt")).text())
    assert subtitle.content == text


async def test_subtitles_refusals(make_client: ClientFactory) -> None:
    client = await make_client()
    bad = await client.get(f"/v1/tts/jobs/{'0' * 32}/subtitles?format=ass")
    assert bad.status == 400 and (await bad.json())["error"]["code"] == "invalid_format"
    missing = await client.get(f"/v1/tts/jobs/{'0' * 32}/subtitles")
    assert missing.status == 404
    queued = await client.post("/v1/tts/jobs", json={"text": "Nobody runs this."})
    job_id = (await queued.json())["id"]
    early = await client.get(f"/v1/tts/jobs/{job_id}/subtitles")
    assert early.status == 409 and (await early.json())["error"]["code"] == "not_ready"


async def test_subtitles_are_made_once_off_the_event_loop_and_builds_are_limited_per_address(
    make_client: ClientFactory, worker: WorkerProcess
) -> None:
    """A long job's subtitles take CPU-seconds to cut: they are made in a thread, once per
    format, kept; the event loop answers meanwhile, and one address builds two at a time."""
    client = await make_client()
    text = " ".join(SENTENCES) * 3
    jobs = [await finished(client, {"text": f"{text} Take {word}."}) for word in "abcd"]
    derived = client.app[DERIVED]
    path = f"/v1/tts/jobs/{jobs[0]['id']}/subtitles"
    first = await (await client.get(path)).read()
    assert derived.builds == 1
    for _ in range(3):  # asked again: the kept file, the same bytes, nothing made
        assert await (await client.get(path)).read() == first
    assert derived.builds == 1
    # Slow every build down: the loop still answers at once, and a third build of one address
    # at a time is refused with a 429 that says why (the first two are made, then kept).
    gate = threading.Event()
    slow = derived.get

    async def gated(key: Any, build: Any, address: str) -> bytes:
        return await slow(key, lambda: gate.wait(10) and build(), address)

    derived.get = gated  # type: ignore[method-assign]
    asks = [client.get(f"/v1/tts/jobs/{job['id']}/subtitles?format=vtt") for job in jobs[1:]]
    pending = [asyncio.ensure_future(ask) for ask in asks]
    await asyncio.sleep(0.3)
    started = time.monotonic()
    assert (await client.get("/healthz")).status == 200
    assert time.monotonic() - started < 0.5
    done = [task for task in pending if task.done()]
    assert len(done) == 1 and done[0].result().status == 429, [t.done() for t in pending]
    body = await done[0].result().json()
    assert body["error"]["code"] == "too_many_builds" and done[0].result().headers["Retry-After"]
    gate.set()
    answers = await asyncio.gather(*(task for task in pending if not task.done()))
    assert [a.status for a in answers] == [200, 200]
