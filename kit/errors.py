"""What the user must fix, kept apart from bugs (which keep their traceback)."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """The exit statuses of `micakit`, documented in the README."""

    OK = 0
    USER_ERROR = 2  # bad input: the message says what is wrong and what to do
    SERIES_FAILED = 3  # a run failed in a way that ends the series (amendment 8.4)
    VERIFY_MISMATCH = 4  # `verify` found a number or a raw file that differs
    INTERRUPTED = 130  # Ctrl-C or SIGTERM; `series --resume DIR` goes on


class UserError(Exception):
    """Something the user must fix. `fix` says how; the CLI prints both, no traceback."""

    exit_code: ExitCode = ExitCode.USER_ERROR

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message}\n  fix: {self.fix}"

    def __reduce__(self) -> tuple:
        # whole across processes (kit.engine.fanout's workers): the fix too, not the message alone
        return (type(self), (self.message, self.fix))


class SeriesFailed(UserError):
    """A run failed in a way that ends the series; finished runs are kept."""

    exit_code = ExitCode.SERIES_FAILED


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: the unfinished run has no record and runs again on resume.

    Kept here rather than beside the series that raises it, so that the CLI maps it to its exit
    code without importing the engine at start-up.
    """


class DirectoryDiffers(UserError):
    """A results directory that is no longer what its series wrote: `verify` names each part."""

    exit_code = ExitCode.VERIFY_MISMATCH
