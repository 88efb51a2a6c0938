"""ChatTTS voice data: parse and validate speaker strings, pack reference recordings. No torch.

A voice is one of three strings: a ChatTTS speaker embedding (base16384 of LZMA-compressed float16,
the format `Chat.sample_random_speaker()` returns and users share), or a JSON object holding a
sample prompt (`{"chattts": "sample", "spk_smp": ..., "txt_smp": ...}`) or a reference recording
with its transcript (`{"chattts": "recording", ...}`) that the engine encodes into a sample prompt.
"""

from __future__ import annotations

import base64
import json
import lzma
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from core.text.normalize import normalize

# ChatTTS 0.2.x: speaker embeddings have the GPT's width; sample prompts hold num_vq code rows.
SPEAKER_DIM = 768
NUM_VQ = 4
NUM_CODES = 625  # FSQ levels 5*5*5*5; code 625 is the end-of-audio token, never in a prompt
# A reference recording long enough to carry a timbre, short enough that its codes (46.9 per
# second) leave most of the GPT's 4096-position context to the text and the generated audio.
MIN_RECORDING_S = 1.0
MAX_RECORDING_S = 20.0
MAX_PROMPT_FRAMES = int(MAX_RECORDING_S * 47) + 1
MAX_VOICE_CHARS = 1_400_000  # a 20 s, 24 kHz, 16-bit recording in base64 (1.28 M) + transcript
RECORDING_RATE = 24_000
# Strings of ChatTTS's own formats are short: an embedding is about 900 characters and the
# prompt of the longest recording about 4,300. Longer ones are refused before any decoding.
MAX_B14_CHARS = 16_384
# What their LZMA streams may expand to: a generous embedding width, the longest prompt's codes.
# A stream that goes past is a decompression bomb (65 KB of it once expanded to 668 MB).
MAX_EMBEDDING_BYTES = 64 * 1024
# What is said in a 20 s recording, with room: a longer transcript cannot be the recording's.
MAX_TRANSCRIPT_CHARS = 500
MAX_PROMPT_BYTES = MAX_PROMPT_FRAMES * NUM_VQ * 2
# ChatTTS compresses both embeddings and prompts as raw LZMA2 streams with these filters.
_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
_B14_BASE = 0x4E00  # base16384 maps each 14 bits to U+4E00..U+8DFF
_B14_TAIL = 0x3D00  # a final U+3D01..U+3D06 says how many bytes the last group holds


@dataclass(frozen=True)
class VoiceData:
    """What the engine needs to condition ChatTTS on a voice."""

    kind: str  # "embedding", "sample" or "recording"
    spk_emb: str | None = None
    spk_smp: str | None = None
    txt_smp: str | None = None
    recording: np.ndarray | None = None  # float32 mono at RECORDING_RATE


def b14_decode(text: str) -> bytes:
    """Decode base16384 (the encoding of pybase16384, which ChatTTS uses), in numpy: linear in
    the input (a big-integer decoder is quadratic), without the C extension in the web tier."""
    tail = 0
    if text and _B14_TAIL < ord(text[-1]) <= _B14_TAIL + 6:
        tail, text = ord(text[-1]) - _B14_TAIL, text[:-1]
    # UTF-16: a character outside the BMP becomes two surrogates, both out of range below.
    codes = np.frombuffer(text.encode("utf-16-be", "surrogatepass"), dtype=">u2").astype(np.int32)
    codes -= _B14_BASE
    bad = np.flatnonzero((codes < 0) | (codes >= 1 << 14))
    if bad.size:
        raise ValueError(f"not base16384: character U+{codes[bad[0]] + _B14_BASE:04X}")
    # Each character holds 14 bits, left-aligned: the last byte is padded with zero bits.
    bits = np.unpackbits(codes.astype(">u2").view(np.uint8)).reshape(-1, 16)[:, 2:]
    raw = np.packbits(bits.ravel()).tobytes()
    full_groups, partial = divmod(len(codes), 4)
    length = full_groups * 7 + (tail if tail else partial * 14 // 8)
    if tail and partial == 0:  # a tail marker after a complete group of four
        length = (full_groups - 1) * 7 + tail
    return raw[:length]


def _b14(text: str, what: str) -> bytes:
    if len(text) > MAX_B14_CHARS:
        raise ValueError(f"not a ChatTTS {what} (longer than {MAX_B14_CHARS} characters)")
    return b14_decode(text)


def _inflate(data: bytes, limit: int, what: str) -> bytes:
    """ChatTTS's raw LZMA2 stream, expanded to at most `limit` bytes (never more in memory)."""
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
    try:
        raw = decompressor.decompress(data, max_length=limit + 1)
    except lzma.LZMAError as exc:
        raise ValueError(f"not a ChatTTS {what} (bad compressed data: {exc})") from exc
    if len(raw) > limit:
        raise ValueError(f"not a ChatTTS {what} (it expands past {limit} bytes)")
    return raw


def decode_embedding(spk_emb: str) -> np.ndarray:
    """The float16 values of a ChatTTS speaker embedding string; ValueError if malformed."""
    raw = _inflate(_b14(spk_emb, "speaker embedding"), MAX_EMBEDDING_BYTES, "speaker embedding")
    if len(raw) % 2:
        raise ValueError("not a ChatTTS speaker embedding (odd byte count)")
    return np.frombuffer(raw, dtype=np.float16).copy()


def decode_prompt(spk_smp: str) -> np.ndarray:
    """The (num_vq, frames) codes of a ChatTTS sample prompt string; ValueError if malformed."""
    data = _b14(spk_smp, "sample prompt")
    if len(data) < 4:
        raise ValueError("not a ChatTTS sample prompt (too short)")
    shape = tuple(int(v) for v in np.frombuffer(data[:4], dtype="<u2"))
    raw = _inflate(data[4:], MAX_PROMPT_BYTES, "sample prompt")
    codes = np.frombuffer(raw, dtype="<u2")
    if codes.size != shape[0] * shape[1]:
        raise ValueError(f"sample prompt holds {codes.size} codes, its header says {shape}")
    return codes.reshape(shape).copy()


def parse_voice_data(text: str, speaker_dim: int = SPEAKER_DIM) -> VoiceData:
    """Parse and validate a voice string; ValueError says what is wrong with it."""
    text = text.strip()
    if not text:
        raise ValueError("the voice data is empty")
    if len(text) > MAX_VOICE_CHARS:
        raise ValueError(f"the voice data is longer than {MAX_VOICE_CHARS} characters")
    if text.startswith("{"):
        return _parse_json_voice(text)
    values = decode_embedding(text)
    if values.size != speaker_dim:
        raise ValueError(f"a speaker embedding has {speaker_dim} values, this one {values.size}")
    if not np.isfinite(values).all() or not np.any(values):
        raise ValueError("the speaker embedding holds non-finite or only zero values")
    return VoiceData("embedding", spk_emb=text)


def validate_voice_data(text: str, speaker_dim: int = SPEAKER_DIM) -> str:
    """Check a voice string; return its kind ("embedding", "sample", "recording") or raise."""
    return parse_voice_data(text, speaker_dim).kind


def _parse_json_voice(text: str) -> VoiceData:
    try:
        obj: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"voice data is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ValueError("voice data JSON must be an object")
    kind = obj.get("chattts")
    if kind == "sample":
        spk_smp, txt_smp = obj.get("spk_smp"), obj.get("txt_smp")
        if not isinstance(spk_smp, str) or not isinstance(txt_smp, str):
            raise ValueError("a sample voice needs the strings spk_smp and txt_smp")
        if len(txt_smp) > MAX_TRANSCRIPT_CHARS:
            raise ValueError(f"a sample's transcript is at most {MAX_TRANSCRIPT_CHARS} chars")
        codes = decode_prompt(spk_smp)
        if (
            codes.ndim != 2
            or codes.shape[0] != NUM_VQ
            or not 0 < codes.shape[1] <= MAX_PROMPT_FRAMES
        ):
            raise ValueError(f"a sample prompt has {NUM_VQ} rows of 1-{MAX_PROMPT_FRAMES} codes")
        if int(codes.max()) >= NUM_CODES:
            raise ValueError(f"a sample prompt holds codes below {NUM_CODES}")
        if not normalize(txt_smp):
            raise ValueError("the sample's transcript has nothing speakable")
        return VoiceData("sample", spk_smp=spk_smp, txt_smp=txt_smp)
    if kind == "recording":
        audio = _decode_pcm(obj)
        transcript = obj.get("transcript")
        if isinstance(transcript, str) and len(transcript) > MAX_TRANSCRIPT_CHARS:
            raise ValueError(
                f"a recording's transcript is at most {MAX_TRANSCRIPT_CHARS} characters"
            )
        if not isinstance(transcript, str) or not normalize(transcript):
            raise ValueError("a recording voice needs the transcript of what is said in it")
        return VoiceData("recording", txt_smp=normalize(transcript), recording=audio)
    raise ValueError('voice data JSON needs "chattts": "sample" or "recording"')


def _decode_pcm(obj: dict[str, Any]) -> np.ndarray:
    if obj.get("sample_rate") != RECORDING_RATE or not isinstance(obj.get("pcm16"), str):
        raise ValueError(f"a recording voice holds pcm16 (base64) at {RECORDING_RATE} Hz")
    try:
        raw = base64.b64decode(obj["pcm16"], validate=True)
    except ValueError as exc:
        raise ValueError(f"the recording is not valid base64: {exc}") from exc
    audio = np.frombuffer(raw[: len(raw) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    seconds = audio.size / RECORDING_RATE
    if not MIN_RECORDING_S <= seconds <= MAX_RECORDING_S:
        raise ValueError(
            f"the recording lasts {seconds:.1f} s: {MIN_RECORDING_S:g}-{MAX_RECORDING_S:g} s needed"
        )
    if float(np.abs(audio).max()) < 1e-3:
        raise ValueError("the recording is silent")
    return audio


def recording_voice_data(audio: np.ndarray, sample_rate: int, transcript: str) -> str:
    """Pack a reference recording (mono float or int16) and its transcript as voice data.

    The web tier can store this without running the model; a worker turns it into a ChatTTS
    sample prompt (ChatTTS's sample-audio path) the first time the voice is used.
    """
    mono = np.asarray(audio)
    if mono.ndim == 2:
        mono = mono.mean(axis=1) if mono.shape[1] <= 8 else mono.mean(axis=0)
    if mono.dtype.kind in "iu":
        mono = mono.astype(np.float32) / float(np.iinfo(mono.dtype).max + 1)
    mono = _resample(mono.astype(np.float32), sample_rate, RECORDING_RATE)
    pcm = (np.clip(mono, -1.0, 1.0) * 32767.0).astype("<i2")
    data = json.dumps(
        {
            "chattts": "recording",
            "sample_rate": RECORDING_RATE,
            "pcm16": base64.b64encode(pcm.tobytes()).decode("ascii"),
            "transcript": transcript,
        }
    )
    parse_voice_data(data)
    return data


def sample_voice_data(spk_smp: str, transcript: str) -> str:
    """Voice data for an already encoded sample prompt and its (normalized) transcript."""
    data = json.dumps(
        {"chattts": "sample", "spk_smp": spk_smp, "txt_smp": transcript}, ensure_ascii=False
    )
    parse_voice_data(data)
    return data


def _resample(audio: np.ndarray, src: int, dst: int) -> np.ndarray:
    """Linear interpolation: enough for a timbre reference that the DVAE encodes at 24 kHz."""
    if src == dst or audio.size == 0:
        return audio
    if src <= 0:
        raise ValueError(f"invalid sample rate {src}")
    n_out = round(audio.size * dst / src)
    positions = np.linspace(0, audio.size - 1, n_out)
    out: np.ndarray = np.interp(positions, np.arange(audio.size), audio).astype(np.float32)
    return out


@cache
def builtin_embeddings() -> dict[str, str]:
    """The stored speaker embedding of each built-in voice (data/voices.json beside this file)."""
    doc = _stored_voices()
    return {name: entry["spk_emb"] for name, entry in doc["voices"].items()}


@cache
def builtin_seeds() -> dict[str, int]:
    """The generator seed each stored built-in embedding was drawn with."""
    return {name: int(entry["seed"]) for name, entry in _stored_voices()["voices"].items()}


def _stored_voices() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (resources.files(__package__) / "data" / "voices.json").read_text("utf-8")
    )
    return doc
