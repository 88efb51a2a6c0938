#!/usr/bin/env bash
# ChatTTS engine on a lent GPU machine, in under 5 minutes: ChatTTS's own loop against our
# decode runtime (CUDA graphs, bfloat16 weights, float32 logits) at 1, 8 and 32 rows: steps/s,
# audio-s/s, time to first audio, peak GPU memory and KV cache per slot, plus cold start, from
# bench/chattts_bench.py. Targets (issue 13, H200): >= 600 steps/s for one row, >= 100 audio-s/s
# across 32 rows, first audio p50 <= 100 ms alone and <= 300 ms with 32.
#
# The GPU image has Python 3.12 with torch, torchaudio, transformers, safetensors, numba, scipy
# and requests, and no network. What else the engine imports travels as wheels in .whl/:
#
#   here, once (needs PyPI):   bash bench/gpu_check.sh fetch      # ~10 MB into .whl/ (ignored)
#   there (device `run` tool, carry [".whl"]):   bash bench/gpu_check.sh
#   and, for streams by capacity (full-size):       bash bench/gpu_check.sh streams
#
# Figures go to stdout and, as JSON, to $OUT/chattts_gpu.json when $OUT is set.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=.whl
PYTHON=${PYTHON:-python3}
# Pure-Python packages (some published as sdists only: built here into wheels).
PURE=(
    ChatTTS==0.2.5 vocos==0.1.0 encodec==0.1.1 vector-quantize-pytorch==1.32.0 einx==0.4.3
    torch-einops-utils==0.2.0 frozendict==2.5.1 loguru==0.7.3 cn2an==0.5.24 proces==0.1.7
    num2words==0.5.14 docopt==0.6.2 pydantic==2.14.4 annotated-types==0.8.0
    typing-inspection==0.4.5
)
# What the engine tests (run on CUDA by `tests`) need besides.
TESTING=(pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pytest-timeout==2.4.0 redis==8.1.0
         packaging==26.4 pygments==2.21.0)
# Compiled packages: CPython 3.12 manylinux wheels for the GPU image.
BINARY=(pybase16384==0.3.9 pydantic-core==2.50.5 orjson==3.13.0)
MANYLINUX=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64)

fetch() {
    mkdir -p "$WHEELS"
    grep -qx "/$WHEELS/" .git/info/exclude 2>/dev/null || echo "/$WHEELS/" >> .git/info/exclude
    "$PYTHON" -m pip wheel -q --no-deps -w "$WHEELS" "${PURE[@]}" "${TESTING[@]}"
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${MANYLINUX[@]}" -d "$WHEELS" "${BINARY[@]}"
    du -sh "$WHEELS"
}

install() {
    [ -d "$WHEELS" ] || { echo "no $WHEELS/: run 'bash bench/gpu_check.sh fetch' first" >&2; exit 2; }
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$WHEELS"/*.whl
    export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
}

check() {
    install
    nvidia-smi -L || true
    "$PYTHON" -c 'import torch, transformers; print("torch", torch.__version__,
        "transformers", transformers.__version__, "cuda", torch.cuda.is_available())'
    # 256 tokens per row (5.5 s of audio), two runs per batch size (the better one kept).
    timeout 270 "$PYTHON" bench/chattts_bench.py --device cuda --tokens 256 --repeats 2 \
        --batches 1,8,32 --json "${OUT:-/tmp}/chattts_gpu.json"
}

# The ChatTTS engine and runtime tests (tiny random checkpoint) on CUDA: seeds, batching,
# trimming, OOM halving, voices, cancellation, chunking, as on the CPU.
tests() {
    install
    CHATTTS_TEST_DEVICE=cuda timeout 400 "$PYTHON" -m pytest -q -p no:cacheprovider \
        tests/workers/engines/chattts/test_engine.py tests/workers/engines/chattts/test_voices.py \
        tests/workers/engines/chattts/runtime
}

# Streams on the full-size architecture (bench/stream_capacity.py): the capacity the runtime
# measures, then N streamed rows from 1 to twice it, each played by a 1x listener, with
# admission by capacity and without; the target is every stream within the capacity gap-free.
streams() {
    install
    timeout 300 "$PYTHON" bench/stream_capacity.py --device cuda --size full --tokens 256 \
        --slots 64 --json "${OUT:-/tmp}/chattts_gpu_streams.json"
}

case "${1:-check}" in
    fetch) fetch ;;
    check) check ;;
    tests) tests ;;
    streams) streams ;;
    *) echo "usage: $0 [fetch|check|tests|streams]" >&2; exit 2 ;;
esac
