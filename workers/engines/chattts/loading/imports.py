"""ChatTTS's modules one at a time: what the decode runtime uses, without the rest of the library.

`import ChatTTS` runs the package's `__init__`, which imports all of it: transformers' modelling
stack (with torch's compiler and scipy) for the GPT class, einx for the recording encoder's
quantizer, and more; 4.5 s of a 10.5 s cold start on the development CPU (bench/coldstart.py).
Start-up needs the config, normalizer, tokenizer, speaker, embeddings and DVAE decoder modules,
each light on its own. `partial()` registers the packages `ChatTTS` and `ChatTTS.model` without
running their `__init__`, so that those submodules import alone, and puts a stand-in for
`vector_quantize_pytorch` (which the DVAE module imports at its top, for the encoder only).
The first read of anything else from either package (`ChatTTS.Chat`, `ChatTTS.model.GPT`: for
refinement, the library runtime, a reference recording) runs the two `__init__`s in place, in the
same module objects, so every class stays the same; `complete()` does that on purpose. This is
ChatTTS 0.2.5's layout, which pyproject.toml pins; the tests load through it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

PACKAGES = ("ChatTTS", "ChatTTS.model")  # parents first
QUANTIZER = "vector_quantize_pytorch"
_lock = threading.RLock()
_deferred: set[str] = set()


def partial() -> None:
    """Register the packages unrun, unless ChatTTS is imported already (then nothing changes)."""
    with _lock:
        if PACKAGES[0] in sys.modules:
            return
        if QUANTIZER not in sys.modules:
            sys.modules[QUANTIZER] = _QuantizerStandIn(QUANTIZER)
        for name in PACKAGES:
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                raise ImportError(f"{name} is not installed (pip install '.[chattts]')")
            module = importlib.util.module_from_spec(spec)
            module.__getattr__ = _completing(name)  # type: ignore[method-assign]
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
            _deferred.add(name)


def complete() -> None:
    """Run the deferred `__init__`s (importing the rest of ChatTTS); idempotent, thread-safe."""
    with _lock:
        for name in reversed(PACKAGES):  # ChatTTS's own __init__ reads names from ChatTTS.model
            if name not in _deferred:
                continue
            module = sys.modules[name]
            hook = module.__getattr__
            del module.__getattr__  # names missing while the __init__ runs are errors, not hooks
            spec = module.__spec__
            assert spec is not None and spec.loader is not None
            try:
                spec.loader.exec_module(module)
            except BaseException:
                module.__getattr__ = hook  # type: ignore[method-assign]  # a later call retries
                raise
            _deferred.discard(name)


def _completing(name: str) -> Any:
    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):  # the import machinery probing a module
            raise AttributeError(attr)
        if importlib.util.find_spec(f"{name}.{attr}") is not None:  # `from ChatTTS import norm`
            return importlib.import_module(f"{name}.{attr}")
        complete()
        return getattr(sys.modules[name], attr)

    return __getattr__


class _QuantizerStandIn(types.ModuleType):
    """`vector_quantize_pytorch` until it is used: calling `GroupedResidualFSQ` or reading any
    other name imports the real package (and puts it in the stand-in's place)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real_quantizer(), name)

    @staticmethod
    def GroupedResidualFSQ(*args: Any, **kwargs: Any) -> Any:  # the real class's name
        return _real_quantizer().GroupedResidualFSQ(*args, **kwargs)


def _real_quantizer() -> types.ModuleType:
    with _lock:
        if isinstance(sys.modules.get(QUANTIZER), _QuantizerStandIn):
            del sys.modules[QUANTIZER]
        return importlib.import_module(QUANTIZER)
