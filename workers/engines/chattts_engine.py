"""The ChatTTS engine: one Chat per worker, one `infer` per batch, per-row seeds and trimming.

Imported only when the engine is created (it imports torch); see `chattts.py` for the light API.
"""

from __future__ import annotations

import os

# Set before torch initialises CUDA: expandable segments keep the variable-length batches of a
# TTS server from fragmenting the caching allocator. An operator's own setting wins.
if "PYTORCH_CUDA_ALLOC_CONF" not in os.environ and "PYTORCH_ALLOC_CONF" not in os.environ:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import gc
import hashlib
import logging
import math
import secrets
import time
import warnings
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, replace
from importlib.metadata import version
from typing import Any

import ChatTTS
import numpy as np
import torch
from ChatTTS.model import Speaker

from ..job import SynthesisRequest
from ..normalize import normalize
from ..settings import Settings
from ..text import split_sentences
from ..voices import BUILTIN_BY_NAME, BUILTIN_VOICES, Voice
from . import chattts_loader as loader
from .base import SAMPLE_RATE, EngineError, Segment
from .chattts_voices import (
    VoiceData,
    b14_decode,
    builtin_embeddings,
    builtin_seeds,
    parse_voice_data,
    recording_voice_data,
    sample_voice_data,
)

log = logging.getLogger(__name__)

# ChatTTS's default budget: 2048 audio tokens = 43.7 s at 46.875 tokens per second.
MAX_NEW_TOKEN = 2048
# Segment lengths that stay well inside MAX_NEW_TOKEN: 120 Mandarin characters take about 27 s
# at 4.5 syllables per second, 200 English characters about 13 s.
SEGMENT_CHARS_CJK = 120
SEGMENT_CHARS_LATIN = 200
REFINE_MAX_NEW_TOKEN = 384  # ChatTTS's default for the refinement pass
WARMUP_MAX_NEW_TOKEN = 16  # enough to run every module once
REPETITION_PENALTY = 1.05  # ChatTTS's default for audio codes
FRAMES_PER_TOKEN = 2  # the decoder turns each GPT hidden state into two mel frames
VOICE_CACHE_SIZE = 64  # parsed registered voices kept per worker (a recording costs an encode)
# Fault injection for tests through the whole service: the GPT raises a real
# torch.OutOfMemoryError on any forward pass over more rows than this.
FAULT_OOM_ENV = "CHATTTS_FAULT_OOM_ABOVE_BATCH"


@dataclass
class _Batch:
    """What one `infer` call shares with the hooks inside ChatTTS."""

    generators: list[torch.Generator]
    token_lengths: list[int] | None = None
    max_new_token: int = MAX_NEW_TOKEN
    rows: list[np.ndarray] | None = None


@dataclass
class _Row:
    audio: np.ndarray
    tokens: int
    truncated: bool


class _RowSampler:
    """The last logits processor of a batch: draws each row's token with that row's generator.

    It returns logits that are -inf except at the chosen token, so ChatTTS's own draw (made with
    its private generator, as we pass `manual_seed`) can only confirm the choice. Row b of the
    batch owns rows b*k .. b*k+k-1 of the logits (k = num_vq for audio codes, 1 for text).
    """

    def __init__(self, generators: list[torch.Generator], eos: int) -> None:
        self.generators = generators
        self.eos = eos
        self.step = 0

    def __call__(self, _input_ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(logits.float(), dim=-1)
        if self.step == 0:  # ChatTTS treats an end at the first step as a failed row
            probs[:, self.eos] = 0.0
        self.step += 1
        per_row = probs.size(0) // len(self.generators)
        chosen = torch.empty((probs.size(0), 1), dtype=torch.long, device=probs.device)
        for b, generator in enumerate(self.generators):
            rows = slice(b * per_row, (b + 1) * per_row)
            chosen[rows] = torch.multinomial(probs[rows], 1, generator=generator)
        out = torch.full_like(logits, float("-inf"))
        return out.scatter_(1, chosen, 0.0)


class _SeededGenerate:
    """Wraps `GPT.generate`: adds the batch's row sampler and records each row's token count."""

    def __init__(self, inner: Any, chat: _Chat) -> None:
        self.inner = inner
        self.chat = chat

    def __call__(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        batch = self.chat.batch
        if batch is None:
            yield from self.inner(*args, **kwargs)
            return
        sampler = _RowSampler(batch.generators, int(kwargs["eos_token"]))
        kwargs["logits_processors"] = (*kwargs.get("logits_processors", ()), sampler)
        kwargs["manual_seed"] = 0  # ChatTTS's private generator, never the process-global RNG
        for out in self.inner(*args, **kwargs):
            if not kwargs.get("infer_text", False):
                batch.token_lengths = [int(ids.size(0)) for ids in out.ids]
                batch.max_new_token = int(kwargs.get("max_new_token", MAX_NEW_TOKEN))
            yield out


class _Chat(ChatTTS.Chat):  # type: ignore[misc]
    """ChatTTS's Chat, keeping each row of the decoded batch to its own length."""

    batch: _Batch | None = None
    samples_per_token = FRAMES_PER_TOKEN * 256

    def _decode_to_wavs(self, result_list: list[torch.Tensor], use_decoder: bool) -> Any:
        lengths = [int(r.size(0)) for r in result_list]
        wavs = super()._decode_to_wavs(result_list, use_decoder)
        if self.batch is not None and lengths:
            self.batch.rows = trim_rows(np.asarray(wavs), lengths, self.samples_per_token)
        return wavs


def trim_rows(wavs: np.ndarray, lengths: list[int], samples_per_token: int) -> list[np.ndarray]:
    """Cut each row of a padded batch to its own token count: no tail decoded from padding."""
    longest = max(lengths)
    total = wavs.shape[-1]
    return [
        np.ascontiguousarray(
            wavs[i, : max(0, total - (longest - n) * samples_per_token)], dtype=np.float32
        )
        for i, n in enumerate(lengths)
    ]


def speed_level(speed: float) -> int:
    """ChatTTS's `[speed_N]` (0-9, 5 = normal) for a speed factor of 0.5-2.0."""
    level = round(10 * (speed - 0.5)) if speed <= 1.0 else 5 + round(4 * (speed - 1.0))
    return min(9, max(0, level))


def draw_speaker(spk_stat: str, seed: int) -> str:
    """A speaker embedding drawn like `Speaker.sample_random`, from a local seeded generator."""
    stat = torch.from_numpy(np.frombuffer(b14_decode(spk_stat), dtype=np.float16).copy())
    std, mean = stat.chunk(2)
    generator = torch.Generator("cpu").manual_seed(seed)
    values = torch.randn(std.numel(), generator=generator, dtype=torch.float16)
    encoded: str = Speaker._encode(values.mul_(std).add_(mean))
    return encoded


def _language(voice: str) -> str:
    builtin = BUILTIN_BY_NAME.get(voice)
    return "en" if builtin is not None and builtin.language.startswith("en") else "zh"


def _row_seed(segment: Segment, part: int, base: int) -> int:
    key = f"{base}:{segment.index}:{part}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") >> 1


def _halves(text: str) -> list[str]:
    """A segment cut in (about) two at a sentence, clause or word break."""
    return split_sentences(text, max(4, math.ceil(len(text) / 2)))


class ChatTTSEngine:
    """ChatTTS on one device. All methods run in the worker's single engine thread.

    Counters for tests and stats: `infer_calls` (completed `infer` calls), `last_batch_sizes`
    (rows of each `infer` made by the last `synthesize`), `last_token_lengths` (audio tokens per
    returned segment), `last_warnings` (truncations of the last `synthesize`), `oom_splits`,
    `truncations`, `load_seconds`.
    """

    name = "chattts"
    sample_rate = SAMPLE_RATE

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.max_batch = max(1, settings.max_batch)
        self.max_new_token = MAX_NEW_TOKEN
        self.retry_truncated = True  # a truncated segment is re-synthesized once, in halves
        self.model_version = f"ChatTTS {version('ChatTTS')}"
        self.chat: _Chat | None = None
        self.device = torch.device("cpu")
        self.infer_calls = 0
        self.oom_splits = 0
        self.truncations = 0
        self.load_seconds: float | None = None
        self.last_batch_sizes: list[int] = []
        self.last_token_lengths: list[int] = []
        self.last_warnings: list[str] = []
        self._voices: dict[str, str] = {}
        self._voice_cache: OrderedDict[str, VoiceData] = OrderedDict()
        self._oom_hook: Any = None

    # --- lifecycle ------------------------------------------------------------------------------

    def load(self) -> None:
        started = time.perf_counter()
        checkpoint = loader.locate(self.settings.model_dir)
        device = loader.resolve_device(self.settings.device)
        _quiet_libraries()
        if self.settings.compile and device.type != "cuda":
            log.info("CHATTTS_COMPILE is used on CUDA only; running %s uncompiled", device)
        chat = _Chat(logging.getLogger("ChatTTS"))
        loader.load_chat(chat, checkpoint, device, compile=self.settings.compile)
        chat.gpt.generate = _SeededGenerate(chat.gpt.generate, chat)
        chat.samples_per_token = FRAMES_PER_TOKEN * int(chat.config.vocos.head.init_args.hop_length)
        self._voices = _builtin_voices(chat)
        self.chat, self.device = chat, device
        if checkpoint.sha256 is not None:
            self.model_version += f" ({checkpoint.description})"
        if checkpoint.max_new_token:
            self.max_new_token = checkpoint.max_new_token
        if os.environ.get(FAULT_OOM_ENV):
            self.inject_oom(int(os.environ[FAULT_OOM_ENV]))
        self.load_seconds = time.perf_counter() - started
        log.info(
            "ChatTTS loaded from %s on %s in %.1f s", checkpoint.root, device, self.load_seconds
        )

    def warmup(self) -> None:
        saved, self.max_new_token = self.max_new_token, WARMUP_MAX_NEW_TOKEN
        try:
            for voice, text in (("zh_female", "你好"), ("en_female", "Hello")):
                request = SynthesisRequest(text=text, voice=voice, seed=0)
                segment = Segment("warmup", 0, text, request)
                self._infer([segment], [_row_seed(segment, 0, 0)])
        finally:
            self.max_new_token = saved

    def inject_oom(self, above_batch: int | None) -> None:
        """Fault injection: make the GPT raise torch.OutOfMemoryError on batches above a size."""
        if self._oom_hook is not None:
            self._oom_hook.remove()
            self._oom_hook = None
        if above_batch is None or self.chat is None:
            return
        limit = above_batch

        def hook(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
            rows = kwargs["inputs_embeds"].size(0)
            if rows > limit:
                raise torch.OutOfMemoryError(f"injected: {rows} rows > {limit} ({FAULT_OOM_ENV})")

        self._oom_hook = self.chat.gpt.gpt.register_forward_pre_hook(hook, with_kwargs=True)
        log.warning("fault injection: out-of-memory on batches above %d rows", limit)

    def stats(self) -> dict[str, Any]:
        """Counters for the worker's heartbeat and metrics."""
        return {
            "device": str(self.device),
            "infer_calls": self.infer_calls,
            "oom_splits": self.oom_splits,
            "truncations": self.truncations,
            "load_seconds": self.load_seconds,
            "max_new_token": self.max_new_token,
        }

    def voices(self) -> list[Voice]:
        return list(BUILTIN_VOICES)

    # --- text -----------------------------------------------------------------------------------

    def split(self, text: str, request: SynthesisRequest) -> list[str]:
        normalized = normalize(text, _language(request.voice))
        if not normalized:
            raise EngineError("the text holds nothing ChatTTS can speak", retryable=False)
        cjk = sum(1 for ch in normalized if "\u4e00" <= ch <= "\u9fff")
        limit = SEGMENT_CHARS_CJK if cjk * 2 > len(normalized) else SEGMENT_CHARS_LATIN
        return split_sentences(normalized, limit)

    def batch_key(self, request: SynthesisRequest) -> Hashable:
        # Seeds differ freely within a batch (each row has its own generator); ChatTTS takes
        # one voice, one prompt and one set of sampling parameters per `infer`.
        return (
            request.voice,
            speed_level(request.speed),
            request.temperature,
            request.top_p,
            request.top_k,
            request.refine,
        )

    # --- synthesis ------------------------------------------------------------------------------

    def synthesize(self, segments: list[Segment]) -> list[np.ndarray]:
        if self.chat is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        self.last_batch_sizes, self.last_warnings = [], []
        self.last_token_lengths = [0] * len(segments)
        groups: dict[Hashable, list[int]] = {}
        for i, segment in enumerate(segments):
            key = (self.batch_key(segment.request), segment.voice_data or "")
            groups.setdefault(key, []).append(i)
        out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(segments)
        for indexes in groups.values():
            group = [segments[i] for i in indexes]
            for start in range(0, len(group), self.max_batch):
                rows = self._synthesize_rows(group[start : start + self.max_batch])
                for i, row in zip(indexes[start : start + self.max_batch], rows, strict=True):
                    out[i] = row.audio
                    self.last_token_lengths[i] = row.tokens
        return out

    def _synthesize_rows(self, segments: list[Segment]) -> list[_Row]:
        bases = [
            s.request.seed if s.request.seed is not None else secrets.randbits(62) for s in segments
        ]
        rows = self._infer_safe(
            segments, [_row_seed(s, 0, b) for s, b in zip(segments, bases, strict=True)]
        )
        retry: list[tuple[int, list[str]]] = []
        for i, row in enumerate(rows):
            if not row.truncated:
                continue
            pieces = _halves(segments[i].text) if self.retry_truncated else []
            if len(pieces) > 1:
                retry.append((i, pieces))
            else:
                self._warn(
                    segments[i],
                    "hit max_new_token: its audio is cut"
                    + ("" if not self.retry_truncated else " (too short to split)"),
                )
        if not retry:
            return rows
        parts = [replace(segments[i], text=p) for i, pieces in retry for p in pieces]
        seeds = [
            _row_seed(segments[i], k + 1, bases[i])
            for i, pieces in retry
            for k in range(len(pieces))
        ]
        part_rows: list[_Row] = []
        for start in range(0, len(parts), self.max_batch):
            end = start + self.max_batch
            part_rows += self._infer_safe(parts[start:end], seeds[start:end])
        position = 0
        for i, pieces in retry:
            done = part_rows[position : position + len(pieces)]
            position += len(pieces)
            still = any(r.truncated for r in done)
            rows[i] = _Row(
                np.concatenate([r.audio for r in done]), sum(r.tokens for r in done), still
            )
            self._warn(
                segments[i],
                f"hit max_new_token; retried as {len(pieces)} shorter parts"
                + (", still cut" if still else ""),
            )
        return rows

    def _warn(self, segment: Segment, message: str) -> None:
        text = f"job {segment.job_id} segment {segment.index} {message}"
        self.truncations += 1
        self.last_warnings.append(text)
        log.warning("%s", text)

    def _infer_safe(self, segments: list[Segment], seeds: list[int]) -> list[_Row]:
        """`_infer`, halving the batch (recursively) on a CUDA out-of-memory error."""
        try:
            return self._infer(segments, seeds)
        except torch.OutOfMemoryError as exc:
            message = str(exc).splitlines()[0] if str(exc) else "out of memory"
        # Retried outside the except block: its traceback holds the failed batch's tensors.
        self.oom_splits += 1
        self._release_memory(collect=True)
        if len(segments) == 1:
            raise EngineError(f"out of memory on a single segment: {message}", retryable=True)
        half = len(segments) // 2
        log.warning(
            "out of memory on a batch of %d segments (%s): retrying as %d + %d",
            len(segments),
            message,
            half,
            len(segments) - half,
        )
        return self._infer_safe(segments[:half], seeds[:half]) + self._infer_safe(
            segments[half:], seeds[half:]
        )

    def _infer(self, segments: list[Segment], seeds: list[int]) -> list[_Row]:
        """One `Chat.infer` over the segments' texts; they share voice and parameters."""
        chat = self.chat
        if chat is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        request = segments[0].request
        voice = self._voice(segments[0])
        batch = _Batch([torch.Generator(device=self.device).manual_seed(s) for s in seeds])
        # Fresh parameter objects on every call: ChatTTS mutates the ones it is given.
        code = ChatTTS.Chat.InferCodeParams(
            prompt=f"[speed_{speed_level(request.speed)}]",
            spk_emb=voice.spk_emb,
            spk_smp=voice.spk_smp,
            txt_smp=voice.txt_smp,
            temperature=request.temperature,
            top_P=request.top_p,
            top_K=request.top_k,
            repetition_penalty=REPETITION_PENALTY,
            max_new_token=self.max_new_token,
            show_tqdm=False,
        )
        refine = ChatTTS.Chat.RefineTextParams(
            top_P=request.top_p,
            top_K=request.top_k,
            max_new_token=REFINE_MAX_NEW_TOKEN,
            show_tqdm=False,
        )
        chat.batch = batch
        try:
            with torch.inference_mode():
                chat.infer(
                    [s.text for s in segments],
                    stream=False,
                    split_text=False,
                    skip_refine_text=not request.refine,
                    use_decoder=True,
                    params_refine_text=refine,
                    params_infer_code=code,
                )
        except torch.OutOfMemoryError:
            raise
        except (RuntimeError, ValueError, AssertionError, IndexError) as exc:
            raise EngineError(f"ChatTTS inference failed: {exc}", retryable=True) from exc
        finally:
            chat.batch = None
            self._release_memory()
        lengths, rows = batch.token_lengths, batch.rows
        if lengths is None or rows is None or len(rows) != len(segments):
            raise EngineError(
                f"ChatTTS returned no audio for a batch of {len(segments)}", retryable=True
            )
        self.infer_calls += 1
        self.last_batch_sizes.append(len(segments))
        return [
            _Row(audio, n, n >= batch.max_new_token) for audio, n in zip(rows, lengths, strict=True)
        ]

    def _release_memory(self, collect: bool = False) -> None:
        if collect:
            gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # --- voices ---------------------------------------------------------------------------------

    def _voice(self, segment: Segment) -> VoiceData:
        if segment.voice_data:
            return self._registered_voice(segment.voice_data)
        embedding = self._voices.get(segment.request.voice)
        if embedding is None:
            raise EngineError(f"unknown voice {segment.request.voice!r}", retryable=False)
        return VoiceData("embedding", spk_emb=embedding)

    def _registered_voice(self, data: str) -> VoiceData:
        key = hashlib.sha256(data.encode()).hexdigest()
        cached = self._voice_cache.get(key)
        if cached is not None:
            self._voice_cache.move_to_end(key)
            return cached
        try:
            voice = parse_voice_data(data, self._speaker_dim())
        except ValueError as exc:
            raise EngineError(f"invalid voice data: {exc}", retryable=False) from exc
        if voice.kind == "recording":
            voice = self._encode_recording(voice)
        self._voice_cache[key] = voice
        while len(self._voice_cache) > VOICE_CACHE_SIZE:
            self._voice_cache.popitem(last=False)
        return voice

    def _encode_recording(self, voice: VoiceData) -> VoiceData:
        """ChatTTS's sample-audio path: the DVAE encodes the recording into prompt codes."""
        if self.chat is None or voice.recording is None:
            raise EngineError("the chattts engine was not loaded", retryable=True)
        with torch.inference_mode():
            spk_smp: str = self.chat.sample_audio_speaker(voice.recording)
        return VoiceData("sample", spk_smp=spk_smp, txt_smp=voice.txt_smp)

    def voice_from_recording(self, audio: np.ndarray, sample_rate: int, transcript: str) -> str:
        """Voice data (a ChatTTS sample prompt with its transcript) from a reference recording."""
        try:
            packed = parse_voice_data(recording_voice_data(audio, sample_rate, transcript))
        except ValueError as exc:
            raise EngineError(f"invalid reference recording: {exc}", retryable=False) from exc
        voice = self._encode_recording(packed)
        return sample_voice_data(voice.spk_smp or "", voice.txt_smp or "")

    def _speaker_dim(self) -> int:
        return int(self.chat.config.gpt.hidden_size) if self.chat is not None else 768


def _builtin_voices(chat: _Chat) -> dict[str, str]:
    """The stored built-in embeddings; redrawn from their seeds for a model of another width."""
    dim = int(chat.config.gpt.hidden_size)
    voices: dict[str, str] = {}
    for name, embedding in builtin_embeddings().items():
        try:
            parse_voice_data(embedding, dim)
        except ValueError:
            log.warning(
                "stored voice %s does not fit a %d-wide model: redrawn from its seed", name, dim
            )
            embedding = draw_speaker(chat.config.spk_stat, builtin_seeds()[name])
        voices[name] = embedding
    return voices


def _quiet_libraries() -> None:
    """Silence per-step deprecation noise and progress bars of the libraries ChatTTS uses."""
    warnings.filterwarnings("ignore", message=r".*past_key_values.*", category=FutureWarning)
    try:
        from transformers.utils import logging as hf_logging

        hf: Any = hf_logging  # untyped module functions
        hf.set_verbosity_error()
        hf.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a ChatTTS dependency
        pass
