"""The outside clock's compiled stamper and its fallback: each stamps from CLOCK_MONOTONIC,
keeps lines, long lines and a last line without its newline, and the reader falls back to its
own Python stamps where the stamper is not built or cannot start."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.executors.base import RunSpec
from kit.executors.local import LocalExecutor
from kit.measure import clock, stamper
from kit.measure.stamped import read_stamped
from tests.conftest import ROOT

SOURCE = Path(stamper.__file__).with_name("stamper.c")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The stamper as setup.py builds it (build_stamper: cc -O2), into a folder of the test's."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler: the stamper is not built here")
    binary = tmp_path_factory.mktemp("stamper") / "micakit-stamp"
    subprocess.run([cc, "-O2", "-Wall", "-Werror", "-o", str(binary), str(SOURCE)], check=True)
    return binary


@pytest.fixture(params=["stamper", "python"])
def stamping(request, monkeypatch, tmp_path) -> Iterator[str]:
    """Each reader test twice: stamps by the compiled stamper, and by the Python fallback.
    The stamper is started through a wrapper that leaves a mark, so a reader that fell back
    to Python unseen fails the test."""
    if request.param == "python":
        monkeypatch.setenv(stamper.CHOICE_ENV, "python")
        yield request.param
        return
    mark, wrapper = tmp_path / "stamper-ran", tmp_path / "wrapper"
    wrapper.write_text(
        f'#!/bin/sh\necho ran >> {mark}\nexec {request.getfixturevalue("built")} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv(stamper.CHOICE_ENV, str(wrapper))
    yield request.param
    assert mark.is_file(), "the reader did not start the stamper"


def run(tmp_path: Path, code: str):
    return LocalExecutor().run(RunSpec("t", (sys.executable, "-c", code)), tmp_path / "logs")


def test_stamps_are_the_monotonic_clock_as_each_line_arrives(tmp_path, stamping):
    code = (
        "import time\n"
        "for i in range(40):\n"
        "    print(time.monotonic_ns(), flush=True); time.sleep(0.005)\n"
    )
    before = time.monotonic_ns()
    o = run(tmp_path, code)
    lines = list(read_stamped(o.stdout_log))
    delays = [x.stamp_ns - int(x.text) for x in lines]
    assert len(delays) == 40
    # after the line was written, by CLOCK_MONOTONIC (one clock for every process), in order
    assert all(d >= 0 for d in delays)
    assert sorted(delays)[20] < 5_000_000
    assert before < lines[0].stamp_ns and lines[-1].stamp_ns <= time.monotonic_ns()
    assert [x.stamp_ns for x in lines] == sorted(x.stamp_ns for x in lines)


def test_lines_long_lines_and_a_last_partial_line_are_kept(tmp_path, stamping):
    # the moment "c\n" is written is kept (CLOCK_MONOTONIC, as the stamps): "bc" is stamped
    # when its newline came, not when "b" did, however late a busy machine lets the reader read
    written = tmp_path / "newline-written"
    code = (
        "import sys, time\n"
        "sys.stdout.write('a\\nb'); sys.stdout.flush(); time.sleep(0.1)\n"
        f"open({str(written)!r}, 'w').write(str(time.monotonic_ns()))\n"
        "sys.stdout.write('c\\n' + 'z' * (3 << 20) + '\\n'); sys.stdout.flush()\n"
        "print('err', file=sys.stderr, flush=True)\n"
        "sys.stdout.write('after\\ntail without newline'); sys.stdout.flush()\n"
    )
    o = run(tmp_path, code)
    out = list(read_stamped(o.stdout_log))
    assert [x.text[:20] for x in out] == [
        "a",
        "bc",
        "z" * 20,
        "after",
        "tail without newline",
    ]
    assert out[2].text.endswith(
        f"[micakit: line cut: {clock.LINE_CAP} of its {3 << 20} bytes kept]"
    )
    assert out[1].stamp_ns >= int(written.read_text())  # "b" waited for its newline
    assert [x.text for x in read_stamped(o.stderr_log)] == ["err"]


def test_the_stamper_writes_a_ready_record_then_a_record_per_read(built):
    """Each read is stamped as it returns, from CLOCK_MONOTONIC (Python's monotonic clock on
    Linux): the second chunk, written once the first one's record came back, is stamped after
    it was written and the first before. Waiting on the records rather than sleeping holds on a
    busy machine, where the stamper may read late."""
    r, w = os.pipe()
    proc = subprocess.Popen([str(built), str(r)], pass_fds=[r], stdout=subprocess.PIPE)
    os.close(r)
    assert proc.stdout is not None
    records, got, data = stamper.Records(), [], b""
    os.write(w, b"one\ntw")
    while len(got) < 2:  # the ready record and the first chunk's
        chunk = os.read(proc.stdout.fileno(), 1 << 16)
        assert chunk, "the stamper ended before it stamped the first chunk"
        data += chunk
        got += records.feed(chunk)
    written = time.monotonic_ns()
    os.write(w, b"o\n")
    os.close(w)
    rest = proc.communicate(timeout=10)[0]
    got += [x for part in (rest[:5], rest[5:]) for x in records.feed(part)]
    assert proc.returncode == 0
    assert [(place, body) for place, _, body in got] == [
        (0xFFFFFFFF, b""),
        (0, b"one\ntw"),
        (0, b"o\n"),
        (0, b""),  # closed
    ]
    stamps = [stamp for _, stamp, _ in got]
    assert stamps == sorted(stamps) and stamps[1] <= written <= stamps[2]
    # the records split anywhere read the same
    again = stamper.Records()
    whole = data + rest
    split = [x for part in (whole[:7], whole[7:30], whole[30:]) for x in again.feed(part)]
    assert split == got


def test_records_split_anywhere_come_out_whole():
    parser = stamper.Records()
    data = b"".join(
        struct.pack("=IIQ", place, len(body), stamp) + body
        for place, stamp, body in ((1, 10, b"xy"), (0, 20, b""), (2, 30, b"z" * 70))
    )
    got = [x for i in range(0, len(data), 5) for x in parser.feed(data[i : i + 5])]
    assert got == [(1, 10, b"xy"), (0, 20, b""), (2, 30, b"z" * 70)]


def test_no_stamper_built_means_python_stamps(tmp_path, monkeypatch):
    monkeypatch.setenv(stamper.CHOICE_ENV, str(tmp_path / "not-built"))
    assert stamper.available() is None
    monkeypatch.setenv(stamper.CHOICE_ENV, "python")
    assert stamper.available() is None
    o = run(tmp_path, "print('still stamped', flush=True)")
    assert [x.text for x in read_stamped(o.stdout_log)] == ["still stamped"]


def test_a_stamper_that_cannot_start_falls_back_to_python_stamps(tmp_path, monkeypatch):
    broken = tmp_path / "micakit-stamp"
    broken.write_bytes(b"\x7fELF not a program")
    broken.chmod(0o755)
    monkeypatch.setenv(stamper.CHOICE_ENV, str(broken))
    o = run(tmp_path, "import time; print(time.monotonic_ns(), flush=True)")
    (line,) = read_stamped(o.stdout_log)
    assert 0 <= line.stamp_ns - int(line.text) < 1_000_000_000


KIT = """
import sys
from pathlib import Path
from kit.executors.base import RunSpec
from kit.executors.local import LocalExecutor
code = "import time\\nprint('started', flush=True)\\ntime.sleep(300)"
LocalExecutor().run(RunSpec("kit", (sys.executable, "-c", code)), Path(sys.argv[1]))
"""


def test_the_kits_death_leaves_no_stamper_behind(tmp_path, built, monkeypatch):
    # the stamper runs in a session of its own, so no signal to the kit's group reaches it:
    # it ends when the program's streams close (the reader's watch ends the program)
    pidfile, wrapper = tmp_path / "stamper.pid", tmp_path / "wrapper"
    wrapper.write_text(f'#!/bin/sh\necho $$ > {pidfile}\nexec {built} "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, stamper.CHOICE_ENV: str(wrapper), "PYTHONPATH": str(ROOT)}
    kit = subprocess.Popen([sys.executable, "-c", KIT, str(tmp_path / "logs")], env=env)
    log = tmp_path / "logs" / "stdout.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and b"started" in log.read_bytes()):
        assert time.monotonic() < deadline, "the program never printed"
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    kit.kill()
    kit.wait(10)
    deadline = time.monotonic() + 15
    while _alive(pid):
        assert time.monotonic() < deadline, "the stamper outlived the kit"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_stamper_that_ends_before_it_is_ready_leaves_the_sources_to_python(tmp_path, monkeypatch):
    quits = tmp_path / "micakit-stamp"
    quits.write_text("#!/bin/sh\nexit 3\n")  # starts, then ends without its ready record
    quits.chmod(0o755)
    monkeypatch.setenv(stamper.CHOICE_ENV, str(quits))
    o = run(tmp_path, "import sys; print('one', flush=True); sys.stdout.write('two')")
    assert [x.text for x in read_stamped(o.stdout_log)] == ["one", "two"]


def test_with_the_stamper_the_reader_gathers_lines_rather_than_waking_for_each(
    tmp_path, monkeypatch, built
):
    """The reader process sleeps between reads of the stamper's records (clock.GATHER_S), so
    it and its writer threads wake a few times a run, not once a line: the voluntary context
    switches of the run's processes, the program spinning between its lines (none of its
    own), were 1.3 to 2.4 a line here (the stamper's one and the start-up's); reading each
    line as it came made them 4.2 a line (the stamper's, the reader thread's, the writer's).
    The stamps stay the lines' own."""
    import resource

    monkeypatch.setenv(stamper.CHOICE_ENV, str(built))
    lines = 150
    code = (
        "import time\n"
        f"for i in range({lines}):\n"
        "    t = time.monotonic(); print(time.monotonic_ns(), flush=True)\n"
        "    while time.monotonic() < t + 0.002: pass\n"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw
    o = run(tmp_path, code)
    switches = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw - before
    stamped = list(read_stamped(o.stdout_log))
    assert len(stamped) == lines
    assert switches < 3 * lines, switches
    # each line stamped as it arrived, 2 ms apart: gathered for the logs, not for the stamps
    gaps = sorted(b.stamp_ns - a.stamp_ns for a, b in zip(stamped, stamped[1:], strict=False))
    assert gaps[len(gaps) // 2] > 1_500_000


def test_a_nap_ends_with_the_program_and_there_is_none_after(monkeypatch):
    """A run's end is read at once: the nap between reads wakes when the process the kit's
    watch names ends, and takes no time after it."""
    monkeypatch.setattr(clock, "GATHER_S", 5.0)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    watch_r, watch_w = os.pipe()
    try:
        nap = clock._Nap(watch_r)
        nap.watched(b"%d\n" % child.pid, b"%d\n" % child.pid)
        started = time.monotonic()
        nap.take()  # until the child ends, not 5 s
        assert 0.1 < time.monotonic() - started < 3
        child.wait()
        started = time.monotonic()
        nap.take()
        assert time.monotonic() - started < 0.1
        nap.close()
    finally:
        child.kill()
        child.wait()
        os.close(watch_r)
        os.close(watch_w)
