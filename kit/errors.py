"""What the user must fix, kept apart from bugs (which keep their traceback)."""

from __future__ import annotations

import enum
import errno
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType


class ExitCode(enum.IntEnum):
    """The exit statuses of `micakit`, documented in the README."""

    OK = 0
    USER_ERROR = 2  # bad input: the message says what is wrong and what to do
    SERIES_FAILED = 3  # a run failed in a way that ends the series (amendment 8.4)
    VERIFY_MISMATCH = 4  # `verify` found a number or a raw file that differs
    SLOWER = 5  # `compare --fail-slower PCT`: B is slower than A by more than PCT, told apart
    GATE_MISSING = 6  # `compare --fail-slower`: B lacks a configuration or a time A has
    GATE_UNDECIDED = 7  # `compare --fail-slower --fail-ambiguous`: the gate could not decide
    FLEET_INCOMPLETE = 8  # `cloud run`: a machine brought back no verified series (each named)
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
        # whole across processes (kit.results.fanout's workers): the fix too, not the message alone
        return (type(self), (self.message, self.fix))


class SeriesFailed(UserError):
    """A run failed in a way that ends the series; finished runs are kept."""

    exit_code = ExitCode.SERIES_FAILED


class FleetIncomplete(UserError):
    """`cloud run`: some machines did not deliver a verified series; the others' results are
    kept (fleet.json names each machine's state)."""

    exit_code = ExitCode.FLEET_INCOMPLETE


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: the unfinished run has no record and runs again on resume.

    Kept here rather than beside the series that raises it, so that the CLI maps it to its exit
    code without importing the engine at start-up.
    """


# SIGTERM's and Ctrl-C's arrivals while a command runs: the exception a handler raises is lost
# where it lands in code whose exceptions Python ignores (a weakref's callback, __del__, at
# import), so the series looks again before each run (`raise_if_stopped`)
_STOPS: list[int] = []


def _stop(signum: int, frame: FrameType | None) -> None:
    _STOPS.append(signum)
    raise KeyboardInterrupt


def _unraisable(
    previous: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], object]:
    """sys.unraisablehook while a command runs: the KeyboardInterrupt of a counted stop that
    landed where Python ignores exceptions is not printed as an "Exception ignored in" traceback
    (the stop is acted on all the same, `raise_if_stopped`); anything else is, as before."""

    def hook(unraisable: sys.UnraisableHookArgs) -> object:
        if _STOPS and isinstance(unraisable.exc_value, KeyboardInterrupt):
            return None
        return previous(unraisable)

    return hook


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops what runs the way Ctrl-C does (KeyboardInterrupt): the unfinished run is
    rerun on resume, and a stop before the first run leaves nothing measured. Ctrl-C, where
    Python's own handler has it, is counted the same way, so that neither is lost."""
    try:
        previous = signal.signal(signal.SIGTERM, _stop)
    except ValueError:  # not the main thread (tests driving a series from a thread)
        yield
        return
    interrupt = signal.getsignal(signal.SIGINT)
    if interrupt is signal.default_int_handler:
        signal.signal(signal.SIGINT, _stop)
    if previous is not _stop:  # the outermost: a command's own count
        _STOPS.clear()
    hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(hook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        signal.signal(signal.SIGTERM, previous)
        if interrupt is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupt)


def raise_if_stopped() -> None:
    """Raise the KeyboardInterrupt of a SIGTERM that came and whose exception was lost."""
    if _STOPS:
        raise KeyboardInterrupt


def stopped() -> bool:
    """Whether a SIGTERM came while this command ran: an error that follows it is the stop's
    (a KeyboardInterrupt raised inside an extension module's import comes out as an
    ImportError, "initialization failed", with the interrupt as its cause)."""
    return bool(_STOPS)


class DirectoryDiffers(UserError):
    """A results directory that is no longer what its series wrote: `verify` names each part."""

    exit_code = ExitCode.VERIFY_MISMATCH


class MachineError(UserError):
    """The machine's, not the kit's: a full disk, a quota, a read-only or unwritable folder.

    Every finished run is kept (its record is fsynced), so once it is fixed the same command
    (or `--resume`) goes on; the CLI adds which one to the fix.
    """


# what the user does about each errno that is the machine's; any other OSError is a bug
_MACHINE_FIXES = {
    errno.ENOSPC: "free space on {mount}",
    errno.EDQUOT: "free space within your quota on {mount}",
    errno.EROFS: "name a folder on a writable file system",
    errno.EACCES: "name a folder you can write to, or change its permissions",
    errno.EPERM: "name a folder you can write to, or change its permissions",
}
_FULL = (errno.ENOSPC, errno.EDQUOT)


def machine_error(
    e: OSError,
    where: Path | str | None = None,
    needed_bytes: int | None = None,
    elsewhere: str | None = None,
) -> MachineError | None:
    """`e` said the machine's way, or None where it is not the machine's (a bug).

    `where` is the folder being written (a failed write names no file, and a copy names its
    source), `needed_bytes` what the write needed where known, `elsewhere` the option that
    moves the folder to another disk (`--out`, `--data-dir`).
    """
    if e.errno not in _MACHINE_FIXES:
        return None
    what = e.strerror or os.strerror(e.errno)
    if e.errno not in _FULL:
        # a refusal names its own file, which may lie outside `where` (a file read)
        path = _written(e, None) or _written(e, where)
        return MachineError(f"{what} ({path})" if path else what, _MACHINE_FIXES[e.errno])
    path = _written(e, where)
    if path is None:
        fix = "free space on the disk that holds the results directory and its data"
        return MachineError(what, fix + (f", or move them with {elsewhere}" if elsewhere else ""))
    mount = _mount_point(path)
    free = _free_bytes(mount)
    needs = f"; {_size(needed_bytes)} needed" if needed_bytes is not None else ""
    has = f", {_size(free)} free" if free is not None else ""
    fix = _MACHINE_FIXES[e.errno].format(mount=mount)
    if elsewhere:
        fix += f", or name a folder on another disk with {elsewhere}"
    if e.errno == errno.EDQUOT:  # the disk may have room; the user's share of it has none
        return MachineError(f"{what}: your quota on {mount} is used up{needs}, writing {path}", fix)
    return MachineError(f"{what}: the disk at {mount} is full{has}{needs}, writing {path}", fix)


@contextmanager
def writing(
    where: Path | str, needed_bytes: int | None = None, elsewhere: str | None = None
) -> Iterator[None]:
    """What is written under `where` in this block: a machine's OSError becomes a MachineError
    that names the disk; any other stays a bug, with its traceback."""
    try:
        yield
    except OSError as e:
        said = machine_error(e, where, needed_bytes, elsewhere)
        if said is None:
            raise
        raise said from None


def _written(e: OSError, where: Path | str | None) -> str | None:
    """The path written: the error's own where it lies under `where`, else `where`."""
    for name in (e.filename2, e.filename):
        if isinstance(name, (str, bytes, os.PathLike)):
            named = os.path.abspath(os.fsdecode(name))
            if where is None or _under(named, os.path.abspath(where)):
                return named
    return os.path.abspath(where) if where is not None else None


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _mount_point(path: str) -> str:
    p = path
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    return p


def _free_bytes(path: str) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _size(n: int) -> str:
    """Bytes as a reader weighs them."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
