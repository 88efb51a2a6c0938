"""What the CLI's failures are: `CliError` and the exit codes that say what kind each is."""

from __future__ import annotations

OK, FAILED, USAGE, UNAVAILABLE, REJECTED = 0, 1, 2, 3, 4
INTERRUPTED = 130  # 128 + SIGINT, what shells report for a Ctrl-C
SIGPIPE_EXIT = 141  # 128 + SIGPIPE: the reader of the output went away first


class CliError(Exception):
    """A failure to report on stderr, and the exit code that says what kind it is."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def exit_code(status: int, code: str | None) -> int:
    """The exit code of an HTTP error answer: its status and its error code."""
    if code in ("job_failed", "job_dead", "job_cancelled"):
        return FAILED
    if status == 429 or status >= 500:  # busy or down: worth trying again later
        return UNAVAILABLE
    return REJECTED
