"""The machine's errors said as error and fix: which disk, its free space, what to do."""

from __future__ import annotations

import errno
import os
import signal
import sys

import pytest

from kit import errors
from kit.errors import MachineError, machine_error, writing


def test_a_full_disk_names_the_disk_its_free_space_and_the_need(tmp_path):
    said = machine_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), tmp_path / "a", 3 << 20)
    assert said is not None
    assert "is full" in said.message and "3.0 MiB needed" in said.message
    assert f"writing {tmp_path / 'a'}" in said.message and " free" in said.message
    assert said.fix is not None and said.fix.startswith("free space on /")


def test_a_copy_that_fills_the_disk_names_where_it_wrote_not_its_source(tmp_path):
    e = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    e.filename = "/elsewhere/source.bin"  # shutil's copy names its source on a full disk
    said = machine_error(e, tmp_path, elsewhere="--data-dir")
    assert said is not None and f"writing {tmp_path}" in said.message
    assert "another disk with --data-dir" in (said.fix or "")


def test_a_used_up_quota_says_so():
    said = machine_error(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)), "/tmp/x")
    assert said is not None and "quota" in said.message and "quota" in (said.fix or "")


def test_a_refusal_names_its_own_file():
    e = PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/etc/somewhere")
    said = machine_error(e, "/tmp/results")
    assert said is not None and "/etc/somewhere" in said.message


def test_any_other_oserror_is_a_bug_and_keeps_its_traceback(tmp_path):
    assert machine_error(OSError(errno.EIO, "I/O error"), tmp_path) is None
    with pytest.raises(OSError) as raised, writing(tmp_path):
        raise OSError(errno.EIO, "I/O error")
    assert not isinstance(raised.value, MachineError)
    with pytest.raises(MachineError), writing(tmp_path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_sigterm_whose_exception_was_lost_is_raised_again_before_the_next_run():
    """SIGTERM's KeyboardInterrupt can land where Python ignores exceptions (a weakref's
    callback during an import, as a series' start-up once showed): the stop is kept, and the
    engine raises it before its next run."""
    with errors.sigterm_as_interrupt():
        errors.raise_if_stopped()  # nothing asked yet
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        try:
            handler(signal.SIGTERM, None)
        except KeyboardInterrupt:
            pass  # lost, as in a callback whose exceptions are ignored
        with pytest.raises(KeyboardInterrupt):
            errors.raise_if_stopped()
    with errors.sigterm_as_interrupt():  # the next command counts its own
        errors.raise_if_stopped()


def test_a_ctrl_c_whose_exception_was_lost_is_raised_again_too():
    """Python's own Ctrl-C handler is the kit's while a command runs (as SIGTERM's), so a
    KeyboardInterrupt lost in an ignored callback still stops the series; it is Python's
    again after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # a worker may ignore it
    try:
        _ctrl_c_lost_and_raised()
    finally:
        signal.signal(signal.SIGINT, before)


def _ctrl_c_lost_and_raised() -> None:
    with errors.sigterm_as_interrupt():
        handler = signal.getsignal(signal.SIGINT)
        assert callable(handler) and handler is not signal.default_int_handler
        try:
            handler(signal.SIGINT, None)
        except KeyboardInterrupt:
            pass  # lost
        with pytest.raises(KeyboardInterrupt):
            errors.raise_if_stopped()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class _StoppedInDel:
    """An object whose __del__ receives SIGTERM: the handler's KeyboardInterrupt lands where
    Python ignores exceptions, as in an import's weakref callback (one CI run's start-up)."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):  # the handler runs between these bytecodes
            pass


class _Fails:
    def __del__(self) -> None:
        raise RuntimeError("a real bug in a __del__")


def test_a_stop_lost_in_an_ignored_callback_is_not_printed_and_still_stops(monkeypatch):
    """Python prints what it ignores through sys.unraisablehook ("Exception ignored in ...",
    a traceback): a counted stop's KeyboardInterrupt is not printed, anything else still is."""
    said: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: said.append(u.exc_value))
    with errors.sigterm_as_interrupt():
        _Fails()  # collected at once
        assert [type(e) for e in said] == [RuntimeError]
        _StoppedInDel()
        assert errors.stopped() and [type(e) for e in said] == [RuntimeError]
        with pytest.raises(KeyboardInterrupt):
            errors.raise_if_stopped()
        _Fails()
    assert [type(e) for e in said] == [RuntimeError, RuntimeError]
    hook = sys.unraisablehook
    with errors.sigterm_as_interrupt():
        pass
    assert sys.unraisablehook is hook  # the command's hook goes with it
