"""ChatTTS's control tokens: which ones a text and a sentence prompt may carry, found and checked.

Where they come from (ChatTTS 0.2.5; this module imports neither torch nor ChatTTS, the web tier
validates with it):

* `VOCABULARY` is the 50 special tokens that ChatTTS's tokenizer (`asset/tokenizer`, a BERT
  tokenizer, loaded by `ChatTTS/model/tokenizer.py`) carries after its 21,128 BERT entries, ids
  21128-21177, in that order. tests/workers/engines/chattts/test_control_tokens.py checks this
  tuple against the tokenizer of the test checkpoint, so the two cannot drift apart.
* Word-level tokens (`WORD_TOKENS`) are those the text model may write into a text: `Chat._infer`
  (core.py) keeps the ids of a refined text below the id of `[break_0]` and speaks them, less
  the framing tokens below. `[uv_break]`, `[v_break]`, `[lbreak]` and `[laugh]` are the ones
  ChatTTS's README shows ("word level manual control"); `[llbreak]`, `[undefine]`, `[music]` and
  `[pure]` are the rest of that range.
* Sentence-level tokens (`PROMPT_TOKENS`): `[oral_0-9]`, `[laugh_0-2]`, `[break_0-7]`, the prompt
  of the refinement pass (`RefineTextParams.prompt`, e.g. "[oral_2][laugh_0][break_6]", put after
  `[Pbreak]` by `Speaker.decorate_text_prompts`). A text may carry them too (ChatTTS passes them
  to its model as it does any tag).
* `[speed_0-9]` is the code pass's prompt (`InferCodeParams.prompt`): our `speed` field.
* Framing tokens (`FRAMING_TOKENS`) delimit ChatTTS's own prompts (`Speaker.decorate_code_prompts`
  strips `[Stts]`, `[spk_emb]` and `[empty_spk]` from a text): never accepted from a client.

A client's text is checked with the same rule ChatTTS's normalizer uses to spare tags from its
character filter (`Normalizer.sub_pattern`, `\\[[\\w_]+\\]`), limited to ASCII and to a letter
first: anything `[word]` or `[word_N]` is a token and must be one of the accepted ones. Other
square brackets ("[1]", "[note 1]", "[注]") are plain text, spoken without their brackets.
"""

from __future__ import annotations

import re

FRAMING_TOKENS: tuple[str, ...] = (
    "[Sasr]",
    "[Pasr]",
    "[Easr]",
    "[Stts]",
    "[Ptts]",
    "[Etts]",
    "[Sbreak]",
    "[Pbreak]",
    "[Ebreak]",
)
SPEAKER_TOKENS: tuple[str, ...] = ("[spk_emb]", "[empty_spk]")
BREAK_TOKENS: tuple[str, ...] = tuple(f"[break_{i}]" for i in range(8))
LAUGH_TOKENS: tuple[str, ...] = tuple(f"[laugh_{i}]" for i in range(3))
ORAL_TOKENS: tuple[str, ...] = tuple(f"[oral_{i}]" for i in range(10))
SPEED_TOKENS: tuple[str, ...] = tuple(f"[speed_{i}]" for i in range(10))

# ChatTTS's tokenizer's special tokens, in id order (21128 onwards).
VOCABULARY: tuple[str, ...] = (
    *FRAMING_TOKENS,
    "[uv_break]",
    "[v_break]",
    "[lbreak]",
    "[llbreak]",
    "[undefine]",
    "[laugh]",
    *SPEAKER_TOKENS,
    "[music]",
    "[pure]",
    *BREAK_TOKENS,
    *LAUGH_TOKENS,
    *ORAL_TOKENS,
    *SPEED_TOKENS,
)
# Word-level: ids below [break_0], less the framing and speaker tokens.
WORD_TOKENS: tuple[str, ...] = tuple(
    t
    for t in VOCABULARY[: VOCABULARY.index("[break_0]")]
    if t not in FRAMING_TOKENS and t not in SPEAKER_TOKENS
)
# Sentence-level: the refinement pass's prompt.
PROMPT_TOKENS: tuple[str, ...] = (*ORAL_TOKENS, *LAUGH_TOKENS, *BREAK_TOKENS)
# What a text may hold.
TEXT_TOKENS: tuple[str, ...] = (*WORD_TOKENS, *PROMPT_TOKENS)

# Pauses, in milliseconds, for engines that render a break token as silence (eSpeak NG). ChatTTS
# itself decides how long a pause its tokens make; these are our reading of their names.
PAUSE_MS: dict[str, int] = {
    "[uv_break]": 150,  # unvoiced (short) break
    "[v_break]": 300,  # voiced break
    "[lbreak]": 600,  # long break
    "[llbreak]": 1000,  # very long break
    **{t: 100 * i for i, t in enumerate(BREAK_TOKENS)},  # [break_N]: N tenths of a second
}

# Anything token-shaped: a letter, then ASCII letters, digits and underscores, in brackets.
TOKEN_SHAPE = re.compile(r"\[[A-Za-z][A-Za-z0-9_]*\]")
_VOCABULARY_SET = frozenset(VOCABULARY)
_TEXT_TOKEN_SET = frozenset(TEXT_TOKENS)
_PROMPT_TOKEN_SET = frozenset(PROMPT_TOKENS)
# The accepted tokens of a text, longest first (so that no alternative shadows a longer one).
TEXT_TOKEN = re.compile("|".join(re.escape(t) for t in sorted(TEXT_TOKENS, key=len, reverse=True)))
# A prompt holds at most three tokens ("[oral_2][laugh_0][break_6]": 26 characters).
PROMPT_MAX_CHARS = 64


class TokenError(ValueError):
    """A token a client may not use where it put it; the message says why and what would do.

    `code`: `unknown_control_token` (ChatTTS has no such token), `misplaced_control_token` (it
    has, but not for there), `invalid_prompt` (a prompt that is not a run of tokens).
    """

    def __init__(self, token: str, message: str, code: str) -> None:
        super().__init__(message)
        self.token, self.message, self.code = token, message, code


def _code(token: str) -> str:
    return "misplaced_control_token" if token in _VOCABULARY_SET else "unknown_control_token"


def _why(token: str, where: str) -> str:
    if token in SPEED_TOKENS:
        return f"{token} is ChatTTS's speed prompt: set the 'speed' field (0.5-2.0) instead"
    if token in FRAMING_TOKENS or token in SPEAKER_TOKENS:
        return f"{token} frames ChatTTS's own prompts and cannot be used in '{where}'"
    if token in WORD_TOKENS:
        return f"{token} is a word-level token: put it in 'text', not in '{where}'"
    return f"unknown control token {token} in '{where}'"


def check_text_tokens(text: str) -> None:
    """TokenError for the first token-shaped `[word]` of a text that ChatTTS does not accept there.

    Accepted: the word-level tokens and the sentence-level ones (TEXT_TOKENS).
    """
    for match in TOKEN_SHAPE.finditer(text):
        token = match.group(0)
        if token not in _TEXT_TOKEN_SET:
            raise TokenError(
                token,
                f"{_why(token, 'text')}; the control tokens a text may hold are "
                f"{', '.join(TEXT_TOKENS)} (a sentence style such as [oral_2][laugh_0][break_6] "
                "goes in 'prompt')",
                _code(token),
            )


def parse_prompt(prompt: str) -> str:
    """A sentence prompt, checked and compacted ("[oral_2] [laugh_0]" -> "[oral_2][laugh_0]").

    It is a run of sentence-level tokens (oral_0-9, laugh_0-2, break_0-7), each kind at most once,
    spaces between them allowed. TokenError names what is wrong.
    """
    if len(prompt) > PROMPT_MAX_CHARS:
        raise TokenError(
            "",
            f"'prompt' has {len(prompt)} characters: it holds at most one [oral_N], one "
            f"[laugh_N] and one [break_N] (at most {PROMPT_MAX_CHARS} characters)",
            "invalid_prompt",
        )
    accepted = f"the tokens a prompt may hold are {', '.join(PROMPT_TOKENS)}"
    example = "e.g. [oral_2][laugh_0][break_6]"
    tokens: list[str] = []
    kinds: set[str] = set()
    pos = 0
    stripped = prompt.strip()
    while pos < len(stripped):
        if stripped[pos].isspace():
            pos += 1
            continue
        match = TOKEN_SHAPE.match(stripped, pos)
        if match is None:
            end = stripped.find("[", pos + 1)
            piece = stripped[pos : end if end > 0 else len(stripped)].strip()[:40]
            raise TokenError(
                piece,
                f"'prompt' holds {piece!r}, which is not a control token: a prompt is only "
                f"tokens, {example}; {accepted}",
                "invalid_prompt",
            )
        token = match.group(0)
        if token not in _PROMPT_TOKEN_SET:
            raise TokenError(token, f"{_why(token, 'prompt')}; {accepted}", _code(token))
        kind = token[1:].split("_", 1)[0]
        if kind in kinds:
            raise TokenError(
                token,
                f"'prompt' sets [{kind}_N] twice ({token}): give each at most once",
                "invalid_prompt",
            )
        kinds.add(kind)
        tokens.append(token)
        pos = match.end()
    if not tokens:
        raise TokenError(
            "", f"'prompt' is empty: leave it out, or give tokens, {example}", "invalid_prompt"
        )
    return "".join(tokens)


def strip_tokens(text: str) -> str:
    """The text without its accepted control tokens (each one becomes a space)."""
    return TEXT_TOKEN.sub(" ", text)
