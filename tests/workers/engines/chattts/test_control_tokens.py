"""ChatTTS's control tokens on the tiny checkpoint: our constant is its tokenizer's vocabulary,
tokens in a text reach the model as token ids (never as letters), the sentence prompt reaches the
refinement pass, and `normalize: false` skips our spelling, on both runtimes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.queue.job import SynthesisRequest
from core.text.control_tokens import PROMPT_TOKENS, SPEED_TOKENS, VOCABULARY, WORD_TOKENS
from tests.workers.engines.chattts.conftest import requires_chattts
from tests.workers.engines.helpers import split, synthesize
from workers.engines.base import EngineError, Segment

pytestmark = [
    pytest.mark.chattts,
    requires_chattts,
    pytest.mark.filterwarnings("ignore:.*past_key_values.*:FutureWarning"),
]

RUNTIMES = ("engine", "library_engine")  # CHATTTS_RUNTIME=ours, CHATTTS_RUNTIME=library
PROMPT = "[oral_2][laugh_0][break_6]"
BERT_SPECIALS = frozenset({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})


def test_the_constant_is_the_tokenizers_vocabulary(tiny_checkpoint: Path) -> None:
    """core/text/control_tokens.py against the tokenizer ChatTTS loads (its own class)."""
    from ChatTTS.model.tokenizer import Tokenizer

    tokenizer = Tokenizer(str(tiny_checkpoint / "asset" / "tokenizer"))
    bert = tokenizer._tokenizer
    # Every bracketed entry of the vocabulary but BERT's own ([PAD] ... [MASK], [unusedN]).
    bracketed = sorted(
        (i, token)
        for token, i in bert.get_vocab().items()
        if re.fullmatch(r"\[\w+\]", token)
        and token not in BERT_SPECIALS
        and not re.fullmatch(r"\[unused\d+\]", token)
    )
    assert tuple(token for _, token in bracketed) == VOCABULARY
    ids = [i for i, _ in bracketed]
    assert ids == list(range(ids[0], ids[0] + len(VOCABULARY)))  # one id each, in this order
    assert ids[-1] == len(bert) - 1  # the last entries of the vocabulary
    # ChatTTS's own split (core.py): a refined text keeps the ids below [break_0] and speaks
    # them; the word-level tokens are among them, the sentence-level and speed ones are not.
    assert all(bert.convert_tokens_to_ids(t) < tokenizer.break_0_ids for t in WORD_TOKENS)
    for token in (*PROMPT_TOKENS, *SPEED_TOKENS):
        assert bert.convert_tokens_to_ids(token) >= tokenizer.break_0_ids
    for token in VOCABULARY:  # each is one token when it stands in a text
        assert bert.tokenize(f"你{token}好") == ["你", token, "好"]


class Encodes:
    """What reaches the model: every call of the real `Tokenizer.encode` (texts and ids)."""

    def __init__(self, chat: Any) -> None:
        self.chat = chat
        self.calls: list[tuple[list[str], list[list[int]]]] = []
        self._real = chat.tokenizer.encode

    def __call__(
        self, text: list[str], num_vq: int, prompt: Any = None, device: Any = "cpu"
    ) -> Any:
        out = self._real(text, num_vq, prompt=prompt, device=device)
        self.calls.append((list(text), out[0][..., 0].tolist()))
        return out

    def code_pass(self) -> list[list[int]]:
        """Ids of each row of the code pass (the prompt that starts with [Stts])."""
        return [ids for texts, rows in self.calls if "[Stts]" in texts[0] for ids in rows]

    def refine_pass(self) -> list[tuple[str, list[int]]]:
        return [
            (text, ids)
            for texts, rows in self.calls
            if texts[0].startswith("[Sbreak]")
            for text, ids in zip(texts, rows, strict=True)
        ]


@pytest.fixture(params=RUNTIMES)
def any_engine(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


@pytest.fixture
def encodes(any_engine: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Encodes]:
    spy = Encodes(any_engine.chat)
    monkeypatch.setattr(any_engine.chat.tokenizer, "encode", spy)
    yield spy


def _ids(engine: Any, *tokens: str) -> list[int]:
    ids: list[int] = engine.chat.tokenizer._tokenizer.convert_tokens_to_ids(list(tokens))
    return ids


def _synthesize(engine: Any, text: str, **params: Any) -> list[str]:
    request = SynthesisRequest(text=text, seed=3, **params)
    parts = split(engine, text, request)
    synthesize(engine, [Segment("tokens", i, part, request) for i, part in enumerate(parts)])
    return list(parts)


def test_tokens_in_a_text_reach_the_model_as_token_ids(any_engine: Any, encodes: Encodes) -> None:
    text = "你好[laugh]世界[uv_break]欢迎[lbreak]使用[v_break]语音合成[llbreak]。"
    parts = _synthesize(any_engine, text)
    assert parts == [text]  # our normalization and split left every token in place
    [row] = encodes.code_pass()
    for token_id in _ids(any_engine, "[laugh]", "[uv_break]", "[lbreak]", "[v_break]", "[llbreak]"):
        assert row.count(token_id) == 1
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    spelled = set(_ids(any_engine, *letters, *(f"##{c}" for c in letters), "[", "]", "_"))
    assert not spelled & set(row), "a token was read as letters"
    # The text's tokens stand exactly where the text has them, between its characters.
    bert = any_engine.chat.tokenizer._tokenizer
    start = row.index(_ids(any_engine, "你")[0])
    assert bert.convert_ids_to_tokens(row[start : start + 5]) == ["你", "好", "[laugh]", "世", "界"]


def test_tokens_in_an_english_text_add_one_id_each_and_nothing_else(
    any_engine: Any, encodes: Encodes
) -> None:
    _synthesize(any_engine, "Good [laugh] day [uv_break] to you.", voice="en_female")
    _synthesize(any_engine, "Good day to you.", voice="en_female")
    tagged, plain = encodes.code_pass()
    laugh, uv_break = _ids(any_engine, "[laugh]", "[uv_break]")
    assert tagged.count(laugh) == 1 and tagged.count(uv_break) == 1
    assert [i for i in tagged if i not in (laugh, uv_break)] == plain


def test_the_sentence_prompt_steers_the_refinement_pass(any_engine: Any, encodes: Encodes) -> None:
    _synthesize(any_engine, "你好世界。", refine=True, prompt=PROMPT)
    [(text, ids)] = encodes.refine_pass()
    assert text == f"[Sbreak]你好世界。[Pbreak]{PROMPT}"
    oral, laugh, brk, pbreak = _ids(any_engine, "[oral_2]", "[laugh_0]", "[break_6]", "[Pbreak]")
    assert ids[-4:] == [pbreak, oral, laugh, brk]
    # The code pass gets the speed prompt, as in ChatTTS, and none of the sentence tokens
    # (ChatTTS drops ids from [break_0] on from a refined text).
    [row] = encodes.code_pass()
    assert _ids(any_engine, "[speed_5]")[0] in row
    assert not set(_ids(any_engine, *PROMPT_TOKENS)) & set(row)


def test_without_refine_there_is_no_refinement_pass(any_engine: Any, encodes: Encodes) -> None:
    _synthesize(any_engine, "你好世界。", prompt=PROMPT)  # the web tier refuses this pairing
    assert encodes.refine_pass() == [] and len(encodes.code_pass()) == 1


def test_the_prompt_is_part_of_the_library_batch_key(library_engine: Any) -> None:
    plain = SynthesisRequest(text="x", refine=True)
    styled = SynthesisRequest(text="x", refine=True, prompt=PROMPT)
    assert library_engine.batch_key(plain) != library_engine.batch_key(styled)
    other = SynthesisRequest(text="y", refine=True, prompt=PROMPT, seed=4)
    assert library_engine.batch_key(styled) == library_engine.batch_key(other)


def test_normalize_false_skips_our_spelling(engine: Any) -> None:
    spelled = SynthesisRequest(text="x", voice="en_female")
    verbatim = SynthesisRequest(text="x", voice="en_female", normalize=False)
    assert split(engine, "I have 3 cats.", spelled) == ["I have three cats."]
    assert split(engine, "I have 3 cats.", verbatim) == ["I have cats."]  # as ChatTTS drops it
    assert split(engine, "Three [laugh] cats.", verbatim) == ["Three [laugh] cats."]
    assert split(engine, "123", spelled) == ["one hundred and twenty three"]
    with pytest.raises(EngineError, match="nothing ChatTTS can speak") as info:
        split(engine, "123", verbatim)
    assert not info.value.retryable
