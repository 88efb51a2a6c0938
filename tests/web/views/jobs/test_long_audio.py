"""Audio past what one native write may take (87.4 s of Vorbis crashed libsndfile's process):
a long Ogg Vorbis job is made by a worker and served, whole and by segment, by a web process,
and both processes live on."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

import requests
import soundfile as sf

from tests.conftest import WorkerProcess
from tests.web import webproc
from tests.web.webproc import WebProcess

start_web = webproc.start_web  # a fixture

# Mandarin at half speed: about 240 s of eSpeak NG's speech, in three segments of 200 characters.
TEXT = "。".join(["今天天气很好，我们一起去公园散步，看看花草树木，听听鸟儿唱歌" * 3] * 3) + "。"


def wait_succeeded(url: str, job_id: str, timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, object] = requests.get(f"{url}/v1/tts/jobs/{job_id}", timeout=5).json()
        if job["state"] in ("succeeded", "failed", "dead", "cancelled"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still running")


def test_a_long_vorbis_job_is_made_and_served_without_a_crash(
    start_web: Callable[..., WebProcess], worker: WorkerProcess
) -> None:
    web = start_web()
    body = {"text": TEXT, "voice": "zh_female", "format": "ogg", "speed": 0.5, "cache": False}
    answer = requests.post(f"{web.url}/v1/tts/jobs", json=body, timeout=10)
    assert answer.status_code == 202, answer.text
    job = wait_succeeded(web.url, answer.json()["id"], timeout=60)
    assert job["state"] == "succeeded", job
    assert float(str(job["duration_s"])) > 100, job  # past one write's crash
    whole = requests.get(f"{web.url}/v1/tts/jobs/{job['id']}/audio", timeout=30)
    samples, rate = sf.read(io.BytesIO(whole.content))
    assert abs(len(samples) / rate - float(str(job["duration_s"]))) < 0.5
    segment = requests.get(f"{web.url}/v1/tts/jobs/{job['id']}/segments/1", timeout=30)
    assert segment.status_code == 200, segment.text
    assert sf.info(io.BytesIO(segment.content)).duration > 10
    assert worker.process.poll() is None and web.process.poll() is None
    assert int(str(job["attempts"])) == 1, job  # made once: no worker died under it


def test_a_long_vorbis_documents_part_is_served_without_a_crash(
    start_web: Callable[..., WebProcess], worker: WorkerProcess
) -> None:
    """A document's part is encoded by the web process when it is asked for: a part past one
    write's crash, in Ogg Vorbis, asked for again and again."""
    web = start_web(max_text_chars=len(TEXT) // 2)  # the text is a document here
    body = {"text": TEXT, "voice": "zh_female", "format": "ogg", "speed": 0.5, "cache": False}
    answer = requests.post(f"{web.url}/v1/tts/jobs", json=body, timeout=10)
    assert answer.status_code == 202, answer.text
    job = wait_succeeded(web.url, answer.json()["id"], timeout=60)
    assert job["state"] == "succeeded" and job.get("document"), job
    durations = []
    for _ in range(3):
        part = requests.get(f"{web.url}/v1/tts/jobs/{job['id']}/segments/1", timeout=30)
        assert part.status_code == 200, part.text
        durations.append(sf.info(io.BytesIO(part.content)).duration)
    assert min(durations) > 2**21 / 24_000, durations  # past what one write may take
    assert worker.process.poll() is None and web.process.poll() is None
