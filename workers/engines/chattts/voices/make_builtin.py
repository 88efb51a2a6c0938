"""Draw the built-in ChatTTS voices once, with a local seeded generator, into data/voices.json.

Run `python -m workers.engines.chattts.voices.make_builtin` (needs the chattts extra). The output
is data (core/voices/data/voices.json), committed and loaded as is: no worker ever draws a
voice from a random generator.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

# Seeds of the built-in voices. The names' gender and accent are nominal: a random draw from
# ChatTTS's speaker distribution is not labelled; audition them with the real weights and change a
# seed here (then re-run) to pick another speaker.
VOICE_SEEDS: dict[str, int] = {
    "zh_female": 2,
    "zh_male": 1111,
    "en_female": 2222,
    "en_male": 3333,
    "zh_female_2": 4444,
    "zh_male_2": 5555,
    "en_female_2": 6666,
    "en_male_2": 7777,
}
OUTPUT = Path(__file__).resolve().parents[4] / "core" / "voices" / "data" / "voices.json"
GENERATOR = "workers/engines/chattts/voices/make_builtin.py"


def main() -> None:
    from ChatTTS.config import Config

    from workers.engines.chattts.library.params import draw_speaker

    spk_stat = Config().spk_stat
    doc = {
        "about": (
            "ChatTTS speaker embeddings of the built-in voices: float16 values drawn as "
            "randn(768, torch.Generator('cpu').manual_seed(seed), float16) * std + mean with "
            "ChatTTS's speaker statistics (Speaker.sample_random's arithmetic), LZMA-compressed "
            "and base16384-encoded like Chat.sample_random_speaker()."
        ),
        "generator": f"{GENERATOR}, ChatTTS {version('ChatTTS')}",
        "dim": 768,
        "voices": {
            name: {"seed": seed, "spk_emb": draw_speaker(spk_stat, seed)}
            for name, seed in VOICE_SEEDS.items()
        },
    }
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", "utf-8")
    print(f"wrote {len(VOICE_SEEDS)} voices to {OUTPUT}")


if __name__ == "__main__":
    main()
