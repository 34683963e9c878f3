"""The outside clock: lines stamped as they arrive, streams apart, chunks and frames split."""

import errno
import io
import os
import queue
import struct
import sys
import threading
import time

import pytest

from kit.executors.base import RunSpec
from kit.executors.local import LocalExecutor
from kit.measure import clock
from kit.measure.stamped import read_stamped


def run(tmp_path, code: str):
    return LocalExecutor().run(RunSpec("t", (sys.executable, "-c", code)), tmp_path / "logs")


def test_lines_are_stamped_as_they_arrive_and_streams_kept_apart(tmp_path):
    code = (
        "import sys, time\n"
        "print('one', flush=True); time.sleep(0.2)\n"
        "print('err', file=sys.stderr, flush=True); time.sleep(0.2)\n"
        "sys.stdout.write('tail without newline'); sys.stdout.flush()\n"
    )
    o = run(tmp_path, code)
    out = list(read_stamped(o.stdout_log))
    err = list(read_stamped(o.stderr_log))
    assert [x.text for x in out] == ["one", "tail without newline"]
    assert [x.text for x in err] == ["err"]
    assert 0.35e9 < out[1].stamp_ns - out[0].stamp_ns < 1.5e9
    assert out[0].stamp_ns < err[0].stamp_ns < out[1].stamp_ns
    assert o.start_ns <= out[0].stamp_ns <= o.end_ns


def test_stamps_match_the_writers_own_monotonic_time(tmp_path):
    code = (
        "import time\n"
        "for i in range(50):\n"
        "    print(time.monotonic_ns(), flush=True); time.sleep(0.005)\n"
    )
    o = run(tmp_path, code)
    delays = [x.stamp_ns - int(x.text) for x in read_stamped(o.stdout_log)]
    assert len(delays) == 50
    assert all(d >= 0 for d in delays)  # CLOCK_MONOTONIC is one clock across processes
    assert sorted(delays)[25] < 5_000_000


def test_a_fast_writer_never_waits_for_the_reader(tmp_path):
    code = "import sys\nfor i in range(200000): sys.stdout.write('x' * 60 + '\\n')\n"
    start = time.monotonic()
    o = run(tmp_path, code)
    assert o.exit_code == 0 and time.monotonic() - start < 60
    assert sum(1 for _ in read_stamped(o.stdout_log)) == 200000


def test_bytes_are_kept_as_written(tmp_path):
    o = run(tmp_path, "import sys; sys.stdout.buffer.write(b'caf\\xc3\\xa9 \\xff end\\n')")
    assert o.stdout_log.read_bytes().split(b" ", 1)[1] == b"caf\xc3\xa9 \xff end\n"


def test_docker_frames_split_across_reads():
    sink_out, sink_err = queue.SimpleQueue(), queue.SimpleQueue()
    splitters = {clock.STDOUT: clock._Splitter(sink_out), clock.STDERR: clock._Splitter(sink_err)}
    demux = clock._Demux(splitters)

    def frame(stream: int, payload: bytes) -> bytes:
        return struct.pack(">BxxxL", stream, len(payload)) + payload

    data = frame(1, b"step 1") + frame(2, b"warn\n") + frame(1, b"0 loss 2\nstep 20\n")
    for i in range(0, len(data), 3):  # chunks are not frames, and frames are not lines
        demux.feed(data[i : i + 3], 1000 + i)
    got_out = b"".join(iter_queue(sink_out))
    assert [line.split(b" ", 1)[1] for line in got_out.splitlines()] == [
        b"step 10 loss 2",
        b"step 20",
    ]
    assert b"".join(iter_queue(sink_err)).endswith(b" warn\n")


def iter_queue(q):
    while not q.empty():
        yield q.get()


def test_reader_process_stamps_inherited_pipes(tmp_path):
    r, w = os.pipe()
    reader = clock.start_reader([(r, clock.STDOUT)], tmp_path / "o.log", tmp_path / "e.log")
    os.close(r)
    os.write(w, b"a\nb")
    os.close(w)
    assert reader.wait(10) == 0
    assert [x.text for x in read_stamped(tmp_path / "o.log")] == ["a", "b"]
    assert (tmp_path / "e.log").read_bytes() == b""
    assert sys.platform.startswith("linux")


def test_a_line_is_what_a_terminal_shows_and_the_log_keeps_the_bytes(tmp_path):
    code = (
        "import sys\n"
        "sys.stdout.write(' 10%|#    |\\r 50%|###  |\\rstep 10 loss 3.0 time_ms 1\\n')\n"
        "sys.stdout.write('step 20 loss 2.0 time_ms 2\\r\\n')\n"
        "sys.stdout.write('plain\\n')\n"
    )
    o = run(tmp_path, code)
    assert [x.text for x in read_stamped(o.stdout_log)] == [
        "step 10 loss 3.0 time_ms 1",
        "step 20 loss 2.0 time_ms 2",
        "plain",
    ]
    raw = o.stdout_log.read_bytes()
    assert b" 10%|#    |\r 50%|###  |\rstep 10" in raw and b"time_ms 2\r\n" in raw


def test_a_line_over_the_cap_is_cut_with_a_marker_and_later_lines_keep_their_bytes():
    sink = queue.SimpleQueue()
    s = clock._Splitter(sink, cap=10)
    s.feed(b"0123456789abc", 1)
    s.feed(b"def\nshort\n" + b"x" * 25 + b"\nend", 2)
    s.close(3)
    got = b""
    while not sink.empty():
        got += sink.get()
    assert got.split(b"\n")[:-1] == [
        b"2 0123456789 [micakit: line cut: 10 of its 16 bytes kept]",
        b"2 short",
        b"2 xxxxxxxxxx [micakit: line cut: 10 of its 25 bytes kept]",
        b"3 end",
    ]


def test_a_long_line_costs_time_linear_in_its_length():
    # 32 MB in 64 KiB reads: quadratic joining took seconds; linear takes a few milliseconds
    sink = queue.SimpleQueue()
    s = clock._Splitter(sink)
    chunk = b"y" * (1 << 16)
    started = time.process_time()  # CPU time: a busy machine's waits are not the splitter's
    for _ in range(512):
        s.feed(chunk, 1)
    s.feed(b"\n", 2)
    elapsed = time.process_time() - started
    line = sink.get()
    assert line.startswith(b"2 " + b"y" * 100) and b"of its 33554432 bytes kept" in line
    assert len(line) < clock.LINE_CAP + 100
    assert elapsed < 0.5, elapsed


@pytest.mark.parametrize(
    "data",
    [
        b"1 a\n2 b\n",
        b"1 step 0\r\n2 bar 10%\rstep 10 loss 4.2\n\n3 \xe2\x82 half a character\n4 last",
        b"1 a\n+2 an odd stamp that is still an integer\n3 b\n",
        b"1 a\n2\n",  # a stamp and nothing after it
    ],
)
def test_the_whole_file_reading_says_what_the_line_by_line_one_does(tmp_path, data):
    from kit.measure.stamped import _read_line_by_line

    path = tmp_path / "stdout.log"
    path.write_bytes(data)
    assert list(read_stamped(path)) == list(_read_line_by_line(path, data))


def test_a_corrupt_line_is_named_by_its_number(tmp_path):
    path = tmp_path / "stdout.log"
    path.write_bytes(b"1 a\n2 b\nnot a stamp\n")
    with pytest.raises(ValueError, match=r"stdout.log:3: not a stamped line"):
        list(read_stamped(path))


def test_a_full_disk_ends_the_reader_quietly_and_the_run_says_which(small_disk, capfd):
    """The reader keeps reading when its log cannot be written (the program is never blocked
    on a pipe no one reads), prints nothing, and exits with the write's errno; the run raises
    that error, naming the run's folder, for the CLI to say once as error and fix."""
    logs = small_disk.root / "logs"
    logs.mkdir()
    small_disk.fill()
    r, w = os.pipe()
    reader = clock.start_reader([(r, clock.STDOUT)], logs / "o.log", logs / "e.log")
    os.close(r)
    writer = threading.Thread(target=lambda: [os.write(w, b"x" * 999 + b"\n") for _ in range(999)])
    writer.start()
    writer.join(30)
    assert not writer.is_alive(), "the reader stopped reading: the program is blocked"
    os.close(w)
    assert reader.wait(30) == clock.WRITE_FAILED + errno.ENOSPC
    with pytest.raises(OSError) as raised:
        clock.check_written(reader, logs)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(logs)
    with pytest.raises(OSError) as raised:
        run(small_disk.root, "print('a line the disk has no room for')")
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(small_disk.root / "logs")
    assert "Traceback" not in capfd.readouterr().err


class _FullDisk(io.BytesIO):
    """A log whose writes are buffered and whose flush finds the disk full."""

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fileno(self) -> int:  # pragma: no cover - never reached: the flush fails first
        raise OSError(errno.EBADF, "no file")


def test_a_writer_whose_last_flush_fails_ends_and_says_why():
    """The end (None) is taken before the last flush finds the disk full: the writer must not
    wait for another end that never comes (the reader joined it for ever)."""
    writer = clock._Writer(_FullDisk())
    writer.queue.put(b"1 a line\n")
    writer.queue.put(None)  # both there before it starts: the inner loop takes the end
    writer.start()
    writer.join(10)
    assert not writer.is_alive(), "the writer waits for an end it already took"
    assert writer.error is not None and writer.error.errno == errno.ENOSPC
