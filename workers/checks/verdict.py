"""A segment's verdict: passed, failed (with the reasons and the words that differ) or unheard
(nothing could check it; never counted as passed), and which of two attempts is the better."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from workers.checks.words import Comparison

State = Literal["passed", "failed", "unheard"]
_ORDER = {"passed": 0, "unheard": 1, "failed": 2}


@dataclass(frozen=True)
class Verdict:
    state: State
    reasons: list[str] = field(default_factory=list)  # why it failed: signal faults, "words"
    heard_by: str = ""  # the recognizer that checked its words ("" none)
    comparison: Comparison | None = None  # its words against the text's, where heard
    unheard: str = ""  # why its words were not checked
    attempts: int = 1  # attempts made of this segment, this one among them

    def rank(self) -> tuple[int, int, int, float]:
        """Lower is better: passed, then unheard, then failed by fewer reasons and words."""
        words = self.comparison
        return (
            _ORDER[self.state],
            len(self.reasons),
            words.longest_run if words else 0,
            words.error_rate if words else 0.0,
        )

    def public(self) -> dict[str, Any]:
        """As events, cues and callbacks carry it."""
        out: dict[str, Any] = {"verdict": self.state, "attempts": self.attempts}
        if self.reasons:
            out["reasons"] = self.reasons
        if self.heard_by:
            out["heard_by"] = self.heard_by
        if self.comparison is not None:
            out["error_rate"] = round(self.comparison.error_rate, 3)
            out["longest_run"] = self.comparison.longest_run
            if self.comparison.differing:
                out["differing"] = [
                    {"expected": want, "heard": got} for want, got in self.comparison.differing
                ]
        if self.unheard:
            out["unheard"] = self.unheard
        return out
