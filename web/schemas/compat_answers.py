"""What the compatible APIs answer in JSON (OpenAI's and Kokoro's, ElevenLabs', ChatTTS-ui's,
the seed-era API's), as the TypedDicts their views build; the OpenAPI document reads them too."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from web.schemas.answers import WordTime

# -- OpenAI and Kokoro --------------------------------------------------------------------------


class Model(TypedDict):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(TypedDict):
    object: Literal["list"]
    data: list[Model]


class AudioModel(TypedDict):
    id: str


class AudioModelList(TypedDict):
    """The model names in the shape Open WebUI reads."""

    models: list[AudioModel]


class VoiceName(TypedDict):
    id: str  # what a request's `voice` may be
    name: str  # what it is, for a person


class VoiceNames(TypedDict):
    """Every name a `voice` may be, in the shape Open WebUI and Kokoro's clients read."""

    voices: list[VoiceName]


class CaptionedSpeech(TypedDict):
    """Kokoro's captioned speech: the whole audio as base64 beside its words' times."""

    audio: str  # base64
    audio_format: str
    timestamps: list[WordTime] | None  # null with return_timestamps: false
    timestamps_estimated: bool
    job_id: str


class CharacterAlignment(TypedDict):
    """ElevenLabs' alignment: each character of the text with its start and end in seconds."""

    characters: list[str]
    character_start_times_seconds: list[float]
    character_end_times_seconds: list[float]


class TimedSpeech(TypedDict):
    """ElevenLabs' speech with timestamps: audio (base64) and its characters' times; one such
    object a line when streamed."""

    audio_base64: str
    alignment: CharacterAlignment | None
    normalized_alignment: CharacterAlignment | None


# -- ChatTTS-ui's --------------------------------------------------------------------------------


class TtsFile(TypedDict):
    filename: str  # its path on the server's disk (a directory store), else its name
    url: str  # absolute
    inference_time: float
    audio_duration: float


class TtsAnswer(TypedDict):
    """ChatTTS-ui's success: its list of files, and the first one's at the top."""

    code: Literal[0]
    msg: str
    audio_files: list[TtsFile]
    filename: str
    url: str


class TtsFailure(TypedDict):
    """ChatTTS-ui's error, sent with HTTP 200: `msg` says what to fix."""

    code: Literal[1]
    msg: str


# -- the seed-era API ---------------------------------------------------------------------------


class LegacySubmitted(TypedDict):
    task_id: str
    estimate: int  # milliseconds


class LegacyStatus(TypedDict):
    """PENDING; DONE with the WAV as base64; FAILED with why."""

    status: Literal["PENDING", "DONE", "FAILED"]
    audio: NotRequired[str]
    error: NotRequired[str]


class LegacyProblem(TypedDict):
    """One validation error, as FastAPI wrote it."""

    type: str
    loc: list[str | int]
    msg: str
    input: Any
    ctx: NotRequired[dict[str, Any]]


class LegacyValidationError(TypedDict):
    """422 of `POST /tts/submit`."""

    detail: list[LegacyProblem]
