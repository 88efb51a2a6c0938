"""Hypothesis strategies and odd inputs for tests/web/test_fuzz.py.

Texts mix any code point with the edge cases that break services: controls and NUL, format
characters (zero-width, bidi overrides, BOM), right-to-left scripts, combining marks, lone
surrogates, emoji sequences. Bodies are JSON values (mostly objects with the API's field names),
encoded in ways that break them; header values are any bytes HTTP allows.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from core.audio.catalog import FORMATS
from core.queue.voices import BUILTIN_VOICES

MAX_BODY = 64 * 1024
EDGE_CHARS = [
    *"\x00\x01\x1b\x7f\x85\t\n\r\u2028\u2029",  # controls, line separators
    *"\u200b\u200d\u200e\u200f\u202e\u2066\ufeff\u00ad",  # format: zero-width, bidi, BOM
    *"\u0627\u05d0\u0661\u0301\u0e01",  # RTL letters, an Arabic digit, combining, Thai
    *"\ud800\udbff\udc00\udfff",  # lone surrogates
    *'中文\uffff\U0010ffff\ue000 é\\"',
    "\U0001f600",  # emoji, a family (joined by ZWJ), a flag
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1fa\U0001f1f8",
]
ODD_CURSORS = ["0", "0-0", "1-1", "-1", "1-", "٣-٣", "18446744073709551615"]
ODD_CURSORS += ["18446744073709551616-0", "18446744073709551615-18446744073709551615"]
RANGES = ["bytes=0-0", "bytes=-5", "bytes=9-1", "bytes=99999999-", "bytes=0-1,3-4", "items=1-2"]
PROBES = [  # method and path template of the read-side routes
    ("GET", "/v1/tts/jobs/{id}"),
    ("DELETE", "/v1/tts/jobs/{id}"),
    ("GET", "/v1/tts/jobs/{id}/audio"),
    ("HEAD", "/v1/tts/jobs/{id}/audio"),
    ("GET", "/v1/tts/jobs/{id}/segments/{n}"),
    ("GET", "/v1/tts/jobs/{id}/events"),
    ("GET", "/v1/events"),
    ("GET", "/tts/query/{id}"),
    ("GET", "/v1/voices"),
    ("GET", "/static/{id}"),
    ("GET", "/"),
    ("GET", "/readyz"),
]

# Pieces, not characters: an emoji sequence or a flag is several code points.
pieces = st.one_of(st.characters(), st.sampled_from(EDGE_CHARS))
texts = st.lists(pieces, max_size=40).map("".join)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
speech_texts = st.one_of(
    texts,
    st.sampled_from(["Hello there.", "你好，世界。", "Read this, then stop.", "42"]),
    st.builds(lambda n: "word " * n, st.integers(0, 120)),
    st.builds(lambda t: f"Hi {t}.", texts),
)
numbers = st.one_of(st.integers(-5, 300), st.floats(), json_values)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "text": st.one_of(speech_texts, speech_texts, json_values),
    "input": st.one_of(speech_texts, json_values),
    "voice": st.one_of(
        st.sampled_from([v.name for v in BUILTIN_VOICES] + ["alloy", "nova", "", "ZH_FEMALE"]),
        texts,
        json_values,
    ),
    "format": st.one_of(st.sampled_from([*FORMATS, "WAV", "", "m4a"]), json_values),
    "response_format": st.one_of(st.sampled_from([*FORMATS, "aac", "x"]), json_values),
    "model": st.one_of(st.sampled_from(["tts-1", "", "chattts"]), json_values),
    "stream_format": st.sampled_from(["audio", "sse", None, "x"]),
    "speed": numbers,
    "seed": st.one_of(st.integers(-(2**64), 2**64), json_values),
    "temperature": numbers,
    "top_p": numbers,
    "top_k": numbers,
    "refine": st.one_of(st.booleans(), json_values),
    "cache": st.one_of(st.booleans(), json_values),
    "priority": st.sampled_from(["normal", "high", "urgent"]),
    "instructions": texts,
}
objects = st.builds(
    lambda fields, extra: {**extra, **fields},
    st.fixed_dictionaries({}, optional=FIELDS),
    st.dictionaries(texts, json_values, max_size=2) | st.just({}),
)
SPEAKABLE = ["Hello there.", "你好，世界。", "A \u202eflipped\u202c word.", "1 2 3"]
valid = st.fixed_dictionaries(
    {"text": st.sampled_from(SPEAKABLE)},
    optional={
        "voice": st.sampled_from([v.name for v in BUILTIN_VOICES]),
        "format": st.sampled_from(list(FORMATS)),
        "speed": st.floats(0.5, 2.0),
        "seed": st.integers(0, 2**31 - 1),
    },
)
valid_speech = st.fixed_dictionaries(
    {"model": st.just("tts-1"), "input": st.sampled_from(["Hello.", "你好。", "\u200fShalom."])},
    optional={
        "voice": st.sampled_from(["alloy", "nova", "en_male", "zh_female"]),
        "response_format": st.sampled_from(["mp3", "wav", "pcm", "opus", "aac", "flac"]),
        "stream_format": st.sampled_from(["audio", "sse"]),
        "speed": st.floats(0.25, 4.0),
    },
)
bodies = st.one_of(valid, valid_speech, objects, objects, json_values)
# Header values: any legal field-value bytes (visible ASCII, space, tab, obs-text 0x80-0xff).
junk = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=80).map(
    lambda s: s.replace("\x7f", "")
)
CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    "application/json;;;",
    "application/json; charset=latin-1",
    "application/merge-patch+json",
    "text/plain",
    "*/*",
    "",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=zz",
    None,
]
ENCODINGS = ["gzip", "deflate", "br", "zstd", "identity", "GZIP, x", "x-junk"]
clean_headers = st.fixed_dictionaries(
    {"Content-Type": st.just("application/json")},
    optional={
        "Idempotency-Key": st.sampled_from(["k1", "k2", "order-42"]),
        "Cookie": st.just("tts_client=fuzz-client-0000001"),
    },
)
junk_headers = st.fixed_dictionaries(
    {"Content-Type": st.sampled_from(CONTENT_TYPES)},
    optional={
        "Idempotency-Key": st.one_of(junk, st.sampled_from(["k1", "k2", "order-42", " ", "é"])),
        "Last-Event-ID": junk,
        "Authorization": st.one_of(junk, junk.map(lambda s: "Bearer " + s)),
        "Cookie": st.one_of(junk, junk.map(lambda s: "tts_client=" + s)),
        "Accept": st.one_of(junk, st.just("text/html")),
        "Content-Encoding": st.sampled_from(ENCODINGS),
        "Expect": st.one_of(junk, st.just("100-continue")),
        "Origin": junk,
        "X-Request-Id": junk,
    },
)
headers_st = st.one_of(clean_headers, junk_headers)


def encode(body: Any, how: str, cut: int, noise: bytes) -> bytes:
    """JSON text of `body`, made broken in one of several ways."""
    if how == "ascii":  # lone surrogates travel as \\ud800 escapes
        return json.dumps(body, ensure_ascii=True).encode()
    raw = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if how == "utf8":  # lone surrogates travel as invalid UTF-8 bytes
        return raw
    if how == "truncated":
        return raw[: cut % max(1, len(raw))]
    if how == "noise":
        at = cut % (len(raw) + 1)
        return raw[:at] + noise + raw[at:]
    if how == "huge":
        return b'{"text": "' + b"a" * (MAX_BODY + cut % MAX_BODY) + b'"}'
    if how == "padded":  # just under the limit: valid, large, text too long
        return b'{"text": "' + b"b " * ((MAX_BODY - 32) // 2) + b'"}'
    return noise  # binary


encodings = st.one_of(
    st.sampled_from(["ascii", "utf8"]),
    st.sampled_from(["ascii", "utf8", "truncated", "noise", "huge", "padded", "binary"]),
)
