"""ChatTTS's own code path: one `Chat.infer` per batch of rows that share a voice and parameters
(CHATTTS_RUNTIME=library, the benchmarks' "before"), and the glue every path needs: the built-in
voices fitted to the model, the library's logging kept quiet and free of job text."""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING, Any

import torch

from core.infra.logs import DemoteToDebug
from workers.engines.base import EngineError, Segment
from workers.engines.chattts.library.params import draw_speaker, infer_params, row_generators
from workers.engines.chattts.library.sampling import Batch, Row

if TYPE_CHECKING:
    from workers.engines.chattts.library.chat import BatchChat
from core.voices.chattts import VoiceData, builtin_embeddings, builtin_seeds, parse_voice_data

# ChatTTS's normalizer quotes pieces of the text it was given in these lines (see its norm.py).
TEXT_QUOTING_LINES = ("found invalid characters", "replace homophones")
log = logging.getLogger(__name__)


def infer_batch(
    chat: BatchChat,
    segments: list[Segment],
    seeds: list[int],
    voice: VoiceData,
    device: torch.device,
    max_new_token: int,
) -> list[Row]:
    """One `Chat.infer` over the segments' texts, each row with its own seed and length."""
    request = segments[0].request
    batch = Batch(row_generators(seeds, device))
    code, refine = infer_params(request, voice, max_new_token)
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
    lengths, rows = batch.token_lengths, batch.rows
    if lengths is None or rows is None or len(rows) != len(segments):
        raise EngineError(
            f"ChatTTS returned no audio for a batch of {len(segments)}", retryable=True
        )
    return [Row(audio, n, n >= batch.max_new_token) for audio, n in zip(rows, lengths, strict=True)]


def builtin_voices(config: Any) -> dict[str, str]:
    """The stored built-in embeddings; redrawn from their seeds for a model of another width
    (`config`: ChatTTS's)."""
    dim = int(config.gpt.hidden_size)
    voices: dict[str, str] = {}
    for name, embedding in builtin_embeddings().items():
        try:
            parse_voice_data(embedding, dim)
        except ValueError:
            log.warning(
                "stored voice %s does not fit a %d-wide model: redrawn from its seed", name, dim
            )
            embedding = draw_speaker(config.spk_stat, builtin_seeds()[name])
        voices[name] = embedding
    return voices


def library_logger() -> logging.Logger:
    """ChatTTS's logger, its lines that quote a job's text kept to DEBUG."""
    logger = logging.getLogger("ChatTTS")
    if not any(isinstance(f, DemoteToDebug) for f in logger.filters):
        logger.addFilter(DemoteToDebug(*TEXT_QUOTING_LINES))
    return logger


def quiet_libraries() -> None:
    """Silence per-step deprecation noise and progress bars of the libraries ChatTTS uses."""
    warnings.filterwarnings("ignore", message=r".*past_key_values.*", category=FutureWarning)
    try:
        from transformers.utils import logging as hf_logging

        hf: Any = hf_logging  # untyped module functions
        hf.set_verbosity_error()
        hf.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a ChatTTS dependency
        pass


def cache_compiled_normalizer() -> None:
    """Keep the machine code of ChatTTS's normalizer on disk. numba compiles its four functions
    at their first call, without a cache: 2.8 s of the first synthesis of every process on the
    development CPU. The cache goes in NUMBA_CACHE_DIR when set, else beside ChatTTS's source
    when writable, else the user's cache directory; it is keyed by the source file and the CPU,
    so an upgrade recompiles. With nowhere writable, the functions compile as before."""
    import ChatTTS.norm as norm

    for compiled in (norm._find_index, norm._fast_replace, norm._split_tags, norm._combine_tags):
        try:
            compiled.enable_caching()
        except RuntimeError as exc:  # numba: "no locator available" (read-only everywhere)
            log.info("ChatTTS's normalizer is compiled in every process: %s", exc)
            return
