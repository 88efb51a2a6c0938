"""How much right context a streamed chunk needs: chunks decoded with a lookahead of L tokens
against the one-shot decode of the same hidden states, on ChatTTS's full-size decoder and Vocos
(random weights: the networks' reach is what is measured, not the voice). Prints, per lookahead
and first-chunk length, the SNR of each chunk against its slice of the one-shot audio (median and
worst over the chunks) and the latency the lookahead adds at a given steps/s.

    python -m bench.lookahead [--tokens 240] [--chunk 24] [--steps-per-s 600]
"""

from __future__ import annotations

import re
import statistics
import sys

import numpy as np

from bench.lib import cli
from bench.lib.cli import REPO_ROOT

# The layer scales of the ConvNeXt blocks: ChatTTS's decoder names them `weight`, Vocos `gamma`.
LAYER_SCALE = re.compile(r"(decoder_block\.\d+\.weight|\.gamma)$")


def snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    n = min(reference.size, other.size)  # no lookahead: the last chunk may run a hop long
    reference, other = reference[:n], other[:n]
    noise = float(np.sum((reference - other) ** 2))
    if noise == 0:
        return float("inf")
    return float(10 * np.log10(float(np.sum(reference**2)) / noise))


def main(argv: list[str] | None = None) -> int:
    p = cli.parser("bench.lookahead", __doc__)
    p.add_argument("--tokens", type=int, default=240, help="hidden states decoded (240: 5 s)")
    p.add_argument("--chunk", type=int, default=24, help="tokens per chunk (24)")
    p.add_argument("--firsts", default="8,24", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--steps-per-s", type=float, default=600.0, help="for the added latency")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT))
    import torch

    from bench.lib.checkpoints import random_checkpoint
    from workers.engines.chattts.loading import loader
    from workers.engines.chattts.runtime.vocoder import Cursor, Vocoder

    torch.manual_seed(0)
    root = random_checkpoint("full")
    chat = loader.load_chat(loader.locate(str(root)), torch.device("cpu"))
    # An untrained ConvNeXt block scales its output by 1e-6 (its layer scale's initial value):
    # random weights would pass the input through and hide the networks' reach. Trained ones
    # are of order 0.1-1; 0.5 here exercises every block's full reach.
    with torch.no_grad():
        for name, parameter in [*chat.decoder.named_parameters(), *chat.vocos.named_parameters()]:
            if LAYER_SCALE.search(name):
                parameter.fill_(0.5)
    vocoder = Vocoder(chat.decoder, chat.vocos)
    hiddens = torch.randn(args.tokens, int(chat.config.gpt.hidden_size))
    whole = vocoder.decode(hiddens)
    exact = vocoder.exact_tokens
    print(f"exact lookahead (the networks' reach): {exact} tokens; chunks of {args.chunk} tokens")
    print(f"{'first':>5} {'lookahead':>9} {'median SNR dB':>13} {'worst SNR dB':>12} {'+ms':>6}")
    for first in args.firsts:
        for lookahead in sorted({0, 2, 4, 8, 16, 32, exact}):
            cursor, pieces = Cursor(), []
            for available in range(1, args.tokens + 1):
                while True:
                    size = first if cursor.emitted == 0 else args.chunk
                    piece = vocoder.chunk(hiddens[:available], cursor, size, lookahead, False)
                    if piece is None:
                        break
                    pieces.append(piece)
            last = vocoder.chunk(hiddens, cursor, args.chunk, lookahead, True)
            assert last is not None  # a finished row always gives its rest
            pieces.append(last)
            snrs, start = [], 0
            for piece in pieces[:-1]:  # the last one is decoded with everything there is
                snrs.append(snr_db(whole[start : start + piece.size], piece))
                start += piece.size
            added_ms = 1000 * lookahead / args.steps_per_s
            print(
                f"{first:>5} {lookahead:>9} {statistics.median(snrs):>13.1f} "
                f"{min(snrs):>12.1f} {added_ms:>6.0f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
