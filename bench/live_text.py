"""Simulated LLM answers for bench.live: a few English sentences per session, distinct per session,
written token by token (a token about 4 characters) at a rate of their own, all from a seed."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

RATE_RANGE = (30.0, 100.0)  # tokens per second an LLM writes
SENTENCES_RANGE = (3, 5)

_OPENERS = ("Sure", "Of course", "Good question", "Right", "Well", "Okay", "Certainly", "Yes")
_SUBJECTS = ("the old lighthouse", "your new garden", "the morning train", "a quiet library",
             "the mountain village", "our weekly meeting", "the river festival",
             "a small bakery", "the city museum", "the winter market", "my neighbour's dog",
             "the science fair", "a long bicycle ride", "the harbour cafe")  # fmt: skip
_VERBS = ("opens", "closes", "gets busy", "looks lovely", "needs attention", "starts",
          "feels calm", "stays open", "fills up", "slows down")  # fmt: skip
_TIMES = ("early on Monday", "just after sunrise", "late in the evening", "around noon",
          "every other weekend", "before the holidays", "when it rains", "in late spring",
          "on the first Friday of the month", "after the school day ends")  # fmt: skip
_TAILS = ("so it helps to plan a little ahead", "and most people arrive a bit early",
          "which surprises many first-time visitors", "though the details change each year",
          "and the staff are happy to answer questions", "so bring a warm jacket just in case",
          "and the best seats go quickly", "which makes it a pleasant place to spend an hour",
          "although the parking can be difficult",
          "and you can usually hear music nearby")  # fmt: skip
_ADVICE = ("Check the timetable the day before you go.", "Take a friend along if you can.",
           "Write down any questions you want to ask.", "Remember to bring some water.",
           "Arrive ten minutes early to find a good spot.", "Ask at the front desk for a map.",
           "Keep an eye on the weather forecast.",
           "Tickets are cheaper when bought online.")  # fmt: skip
_TOKEN = re.compile(r"\s*\S{1,4}")


@dataclass(frozen=True)
class Answer:
    """One session's answer: its sentences, its tokens with the sentence each one belongs to
    (a sentence's last token ends it), and the rate they are written at (tokens/s)."""

    sentences: list[str]
    tokens: list[tuple[int, str]]  # (sentence index, token text), in order
    rate: float

    @property
    def text(self) -> str:
        return "".join(token for _, token in self.tokens)

    def at(self, k: int) -> float:
        """Seconds from the start at which token k is written."""
        return k / self.rate

    def sentence_end(self, s: int) -> float:
        """Seconds from the start at which sentence s's last token is written."""
        return self.at(max(k for k, (i, _) in enumerate(self.tokens) if i == s))

    @property
    def last(self) -> float:
        return self.at(len(self.tokens) - 1)


def _sentence(rng: random.Random, number: int) -> str:
    subject = rng.choice(_SUBJECTS)
    # The number inside the sentence: one that ends it ("on day 3.") may go on ("3.5"), so its
    # segment waits for the next token; most sentences end with a word.
    return (
        f"On day {number}, {subject} {rng.choice(_VERBS)} {rng.choice(_TIMES)}, "
        f"{rng.choice(_TAILS)}."
    )


def tokens_of(sentences: list[str]) -> list[tuple[int, str]]:
    """The sentences joined by spaces, cut into tokens of up to 4 characters after any spaces."""
    out: list[tuple[int, str]] = []
    for s, sentence in enumerate(sentences):
        text = sentence if s == 0 else f" {sentence}"
        out += [(s, piece) for piece in _TOKEN.findall(text)]
    return out


def answer(seed: int, session: int) -> Answer:
    """Session `session`'s answer (the same for every mode and every N)."""
    rng = random.Random(seed * 100_003 + session)
    count = rng.randint(*SENTENCES_RANGE)
    opener = rng.choice(_OPENERS)
    sentences = [f"{opener}, here is what I know about session {session + 1} so far."]
    sentences += [_sentence(rng, rng.randint(2, 99)) for _ in range(count - 2)]
    sentences.append(rng.choice(_ADVICE))
    return Answer(sentences, tokens_of(sentences), rng.uniform(*RATE_RANGE))


def answers(seed: int, n: int) -> list[Answer]:
    return [answer(seed, i) for i in range(n)]
