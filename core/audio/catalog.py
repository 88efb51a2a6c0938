"""Every audio format the service writes, in one place: its MIME type and file extension, and the
one encoder that makes it, whole or streamed (FFmpeg through PyAV; libsndfile for Ogg Vorbis;
PCM and WAV written here). The lists the APIs accept are read from here, ElevenLabs' too."""

from __future__ import annotations

from dataclasses import dataclass

# The most samples one call hands a native encoder (libsndfile, FFmpeg): libsndfile 1.2.2's Vorbis
# encoder crashes its process when one write passes about 2.0 million frames (87 s at 24 kHz);
# every length up to 4.8 million in writes of this size was measured fine, for each encoder. Every
# write is cut to it, whatever the format.
MAX_FRAMES_PER_WRITE = 1 << 18  # 10.9 s at 24 kHz


@dataclass(frozen=True)
class AudioFormat:
    """A format and its one encoder: written here (`own`: PCM, and WAV's header before it),
    libsndfile's (`sndfile`: its container and subtype) or FFmpeg's through PyAV (`av`: its
    container, codec and bit rate), for a whole file and for a stream alike."""

    name: str
    mime: str
    extension: str
    sndfile: tuple[str, str] | None = None
    av: tuple[str, str, int | None] | None = None
    # A document's file is its PCM parts joined as it is sent (WAV: after a header); another
    # format's is encoded from them once, when the document ends (core/audio/documents.py).
    joined: bool = False

    @property
    def encoder(self) -> str:
        return "libsndfile" if self.sndfile else "FFmpeg" if self.av else "own"


# Each format's encoder, measured on 30 s of speech (python -m bench.encoders; the table is in
# docs/performance.md, "Other benchmarks"): FFmpeg's MP3 takes half libsndfile's time, its FLAC
# as many bytes in a few milliseconds more, and both stream, which libsndfile's cannot (it
# completes their headers at the end).
CATALOG: dict[str, AudioFormat] = {
    f.name: f
    for f in (
        AudioFormat("wav", "audio/wav", "wav", joined=True),  # 16-bit mono, 24 kHz
        AudioFormat("mp3", "audio/mpeg", "mp3", av=("mp3", "libmp3lame", 64_000)),
        # libopus: a whole file in a third of libsndfile's time.
        AudioFormat("opus", "audio/ogg; codecs=opus", "opus", av=("ogg", "libopus", 32_000)),
        # FFmpeg's own Vorbis encoder takes stereo only (its wheels carry no libvorbis).
        AudioFormat("ogg", "audio/ogg", "ogg", sndfile=("OGG", "VORBIS")),
        AudioFormat("flac", "audio/flac", "flac", av=("flac", "flac", None)),
        # 16-bit little-endian mono at 24 kHz.
        AudioFormat("pcm", "audio/pcm", "pcm", joined=True),
        # ADTS frames, what OpenAI's API returns; libsndfile has no AAC.
        AudioFormat("aac", "audio/aac", "aac", av=("adts", "aac", 64_000)),
    )
}
assert all(not (f.sndfile and f.av) for f in CATALOG.values()), "one encoder per format"
FORMATS = tuple(CATALOG)
# What OpenAI's speech API returns, in its own order (its `response_format`).
OPENAI_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
JOINED_FORMATS = frozenset(name for name, f in CATALOG.items() if f.joined)
AV_FORMATS = {name: f.av for name, f in CATALOG.items() if f.av is not None}
assert set(OPENAI_FORMATS) <= set(CATALOG)


@dataclass(frozen=True)
class OutputFormat:
    """An ElevenLabs `output_format` (pcm_16000, mp3_22050_32, ulaw_8000, opus_48000_64, ...):
    its codec, sample rate and (mp3, opus) bit rate in kbit/s. Speech is made at 24 kHz and
    resampled to its rate; mp3 and opus are FFmpeg's (`av` above), μ-law is G.711's table."""

    name: str
    codec: str
    rate: int
    kbps: int | None = None


def _elevenlabs_formats() -> dict[str, OutputFormat]:
    """Every `output_format` served, by name; a name without its bit rate means the first."""
    found = {f"pcm_{rate}": OutputFormat(f"pcm_{rate}", "pcm", rate) for rate in ELEVENLABS_PCM}
    found["ulaw_8000"] = OutputFormat("ulaw_8000", "ulaw", 8000)
    for codec, table in (("mp3", ELEVENLABS_MP3), ("opus", ELEVENLABS_OPUS)):
        for rate, bit_rates in table.items():
            for kbps in bit_rates:
                name = f"{codec}_{rate}_{kbps}"
                found[name] = OutputFormat(name, codec, rate, kbps)
            found[f"{codec}_{rate}"] = found[f"{codec}_{rate}_{bit_rates[0]}"]
    return found


ELEVENLABS_PCM = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
# Sample rate -> the bit rates (kbit/s) ElevenLabs names for it; the first is the default.
ELEVENLABS_MP3 = {22050: (32,), 24000: (48,), 44100: (128, 32, 64, 96, 192)}
ELEVENLABS_OPUS = {48000: (64, 32, 96, 128, 192)}
ELEVENLABS_FORMATS = _elevenlabs_formats()
# The names ElevenLabs' API lists (each with its bit rate), sorted.
ELEVENLABS_NAMES = sorted(name for name, f in ELEVENLABS_FORMATS.items() if name == f.name)
