"""The outside clock (§5): one reader stamps every line of a program's output as it arrives.

The reader runs in a process of its own (`python -m kit.measure.clock`) that does nothing else,
so no other work of the kit (progress display, NVML sampling, Docker calls) can hold it up: it waits
in `select`, reads what arrived, stamps it with `time.monotonic_ns()` and hands the lines to a
writer thread, so a slow disk never makes it (or the program) wait. CLOCK_MONOTONIC is one
clock for every process on the machine, so its stamps and the sampler's stand on one axis.

A stamped log holds one line per line of output: `<monotonic_ns> <the line's bytes>`, the
bytes as the program wrote them, without the newline. A line is stamped when its newline
arrives; a last line without one is stamped when the stream closes.

Sources are file descriptors handed down to the reader process:
- `raw`: a pipe carrying one stream (the program's stdout or stderr);
- `mux`: Docker's attach stream, frames of an 8-byte header (stream 1 or 2, size) and a payload;
  chunks are not lines and frames are not lines, so both are buffered and split.

Reading a stamped log back is `kit.measure.stamped`'s.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

from kit.measure import alone, stamper

STDOUT, STDERR = "stdout", "stderr"
_MUX_HEADER = struct.Struct(">BxxxL")
_MUX_STREAMS = {1: STDOUT, 2: STDERR}
_READ_SIZE = 1 << 20  # a long line arrives in few reads; a short one is read as it comes


# With the stamper, the stamps are taken as the lines arrive, so this process need not wake for
# each line: having handed on what came, it sleeps GATHER_S before reading the stamper's records
# again, so that it (and its writer threads) wake a few dozen times a second, not once a line.
# A wake-up of an ordinary process on the program's core can land between the program's reading
# of its clock and its line's write, and leave the program a scheduler slice behind a busy
# neighbour (docs/benchmarks.md). Where a read brought GATHER_BELOW bytes or more (a long
# line), it reads again at once: the stamper's pipe to it must not fill.
# MICAKIT_GATHER_MS sets it in milliseconds (0: each record read as it comes, as before; for
# benchmarks/kit/clock.py --ungathered).
GATHER_ENV = "MICAKIT_GATHER_MS"
GATHER_S = float(os.environ.get(GATHER_ENV, "50")) / 1e3
GATHER_BELOW = 64 << 10

# the reader's exit status when it could not write its logs: this plus the write's errno
WRITE_FAILED = 64
LINE_CAP = 1 << 20  # a line's bytes kept in the log; the rest is counted, and cut


class _Splitter:
    """Turns chunks of one stream into whole lines, keeping the unfinished tail.

    Linear in a line's length: the tail is a list of pieces joined once, when its newline
    comes, so an 8 MB line read 64 KiB at a time costs one copy, not 128 growing ones, and no
    later line's stamp waits on it. A line over LINE_CAP keeps its first LINE_CAP bytes and a
    marker saying how long it was.
    """

    def __init__(self, sink: queue.SimpleQueue, cap: int = LINE_CAP) -> None:
        self._parts: list[bytes] = []
        self._kept = 0  # bytes of the tail held
        self._length = 0  # bytes of the tail seen
        self._cap = cap
        self._sink = sink

    def _add(self, piece: bytes) -> None:
        self._length += len(piece)
        room = self._cap - self._kept
        if room > 0 and piece:
            kept = piece[:room]
            self._parts.append(kept)
            self._kept += len(kept)

    def _take(self) -> bytes:
        line = b"".join(self._parts)
        if self._length > self._kept:
            line += b" [micakit: line cut: %d of its %d bytes kept]" % (self._kept, self._length)
        self._parts, self._kept, self._length = [], 0, 0
        return line

    def feed(self, chunk: bytes, stamp_ns: int) -> None:
        last = chunk.rfind(b"\n")
        if last < 0:
            self._add(chunk)
            return
        lines = chunk[:last].split(b"\n")
        self._add(lines[0])
        lines[0] = self._take()
        if self._cap and any(len(x) > self._cap for x in lines[1:]):
            lines[1:] = [self._cut(x) for x in lines[1:]]
        self._add(chunk[last + 1 :])
        prefix = b"%d " % stamp_ns
        self._sink.put(b"".join(prefix + line + b"\n" for line in lines))

    def _cut(self, line: bytes) -> bytes:
        self._add(line)
        return self._take()

    def close(self, stamp_ns: int) -> None:
        if self._length:
            self._sink.put(b"%d %s\n" % (stamp_ns, self._take()))


class _Demux:
    """Docker's multiplexed attach stream: frames of header + payload, split across reads.

    A bytearray grows in place and drops what was handed on, so a frame of many megabytes is
    gathered in linear time; each piece of a payload goes on as it arrives.
    """

    def __init__(self, splitters: dict[str, _Splitter]) -> None:
        self._buf = bytearray()
        self._stream = 0  # the stream of the frame being read, and its bytes still to come
        self._left = 0
        self._splitters = splitters

    def feed(self, chunk: bytes, stamp_ns: int) -> None:
        self._buf += chunk
        while self._buf:
            if self._left == 0:
                if len(self._buf) < _MUX_HEADER.size:
                    return
                self._stream, self._left = _MUX_HEADER.unpack_from(self._buf)
                del self._buf[: _MUX_HEADER.size]
                continue
            piece = bytes(self._buf[: self._left])
            del self._buf[: len(piece)]
            self._left -= len(piece)
            # stream 0 is stdin echoed back; it carries nothing of the program's
            if self._stream in _MUX_STREAMS:
                self._splitters[_MUX_STREAMS[self._stream]].feed(piece, stamp_ns)

    def close(self, stamp_ns: int) -> None:
        pass


STDERR_CUT = b"[micakit: stderr cut:"  # how the line that marks a cut stderr begins


def stderr_cut(log: Path) -> dict[str, int] | None:
    """What a capped stderr kept: {"kept_bytes", "seen_bytes"} from its cut's marker line, or
    None where nothing was cut (the log is read only when it is as large as a cut makes it)."""
    try:
        data = log.read_bytes() if log.stat().st_size >= 1 << 10 else b""
    except OSError:
        return None
    at = data.find(b" " + STDERR_CUT)
    if at < 0:
        return None
    words = data[at : data.find(b"\n", at)].split()
    # "[micakit: stderr cut: L bytes left out here; K of its S bytes kept ...]"
    return {"kept_bytes": int(words[8]), "seen_bytes": int(words[11])}


class _Writer(threading.Thread):
    """Writes stamped lines as they come; the reader only ever puts into its queue.

    A write that fails (a full disk) is kept in `error` and ends the writing, not the reading:
    the program is never left blocked on a pipe no one reads, and the reader exits saying so.
    """

    def __init__(self, f: BinaryIO, cap: int | None = None) -> None:
        super().__init__(daemon=True)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.error: OSError | None = None
        self._f = f
        # a cap (stderr's, timing.stderr_cap_bytes): its first half written as it comes, then
        # only the latest lines up to the other half held, written at the end behind a marker
        # that says what was left out, so an out-of-memory line at the end is kept (D4)
        self._head = None if cap is None else cap // 2
        self._tail_room = 0 if cap is None else cap - cap // 2
        self._tail: collections.deque[bytes] = collections.deque()
        self._written = self._held = self._dropped = self._seen = 0
        self._cut_stamp = b""
        self._ended = False  # whether the queue's end (None) has been taken

    def _put(self, item: bytes) -> None:
        """Write an item of stamped lines, or hold it past the cap's first half."""
        self._seen += len(item)
        if self._head is None or (not self._tail and self._written + len(item) <= self._head):
            self._f.write(item)
            self._written += len(item)
            return
        self._tail.append(item)
        self._held += len(item)
        while self._held > self._tail_room and len(self._tail) > 1:
            gone = self._tail.popleft()
            self._held -= len(gone)
            self._dropped += len(gone)
            self._cut_stamp = self._cut_stamp or gone.split(b" ", 1)[0]

    def _end(self) -> None:
        """The held lines, behind the cut's marker where lines were left out."""
        if self._dropped:
            kept = self._seen - self._dropped
            self._f.write(
                b"%s %s %d bytes left out here; %d of its %d bytes kept "
                b"(timing.stderr_cap_bytes)]\n"
                % (self._cut_stamp, STDERR_CUT, self._dropped, kept, self._seen)
            )
        for item in self._tail:
            self._f.write(item)
        self._tail.clear()

    def run(self) -> None:
        try:
            self._write()
        except OSError as e:
            self.error = e
            # what arrives after is read, and dropped, up to the end; a write that failed once
            # the end had come (the last flush on a full disk) has nothing more to wait for
            while not self._ended and self.queue.get() is not None:
                pass

    def _write(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                break
            self._put(item)
            # flush whenever the queue runs dry, so a killed series keeps what arrived
            try:
                while (item := self.queue.get_nowait()) is not None:
                    self._put(item)
            except queue.Empty:
                self._f.flush()
                continue
            break
        self._ended = True  # the end (None) is taken: nothing more will come
        self._end()
        self._f.flush()
        os.fsync(self._f.fileno())


def stamp(
    sources: list[tuple[int, str]],
    stdout_path: Path,
    stderr_path: Path,
    ready_fd: int | None = None,
    watch_fd: int | None = None,
    stderr_cap: int | None = None,
) -> None:
    """Read every source until it closes, stamping lines into the two logs; stderr's kept to
    `stderr_cap` bytes, its first and last lines, the cut marked (`_Writer`).

    `ready_fd`, when given, is written to and closed once the reader waits on its sources, so
    the program is started only then and its first lines are stamped like its last.
    `watch_fd`, when given, is a pipe from the kit: it names the run's process group, and its
    end before the sources' means the kit died, so the reader ends that group (kill -9 of the
    kit leaves no program on the card, nor this reader waiting on pipes the program holds).
    """
    with open(stdout_path, "ab") as out_f, open(stderr_path, "ab") as err_f:
        sel = selectors.DefaultSelector()
        # The stamper asks for the priority that wakes it first. Without it this process
        # stamps, so it asks for that priority itself, before its writer threads start (they
        # inherit it). With it, this thread, which takes each chunk from the stamper, keeps an
        # ordinary priority unless MICAKIT_READER_REALTIME=1 asks for the one below the
        # stamper's, and then only where it is the machine's one reader (kit.measure.alone):
        # its work then follows each line at once (at one busy neighbour a core the worst p99
        # halved), but with it the suite's timing tests, several series at once on a loaded
        # two-core runner, failed in every CI run tried (docs/benchmarks.md). Every reader
        # marks its presence, so one that asks sees the others. The writer threads start
        # before it asks and keep an ordinary priority.
        chunks = stamper.start_on([fd for fd, _ in sources], sel)
        if chunks is None:
            _never_starved()
        writers = {STDOUT: _Writer(out_f), STDERR: _Writer(err_f, stderr_cap)}
        for w in writers.values():
            w.start()
        presence = alone.mark(threading.get_native_id()) if chunks is not None else None
        if presence is not None and presence.alone and os.environ.get(REALTIME_ENV) == "1":
            _never_starved()
        splitters = {name: _Splitter(w.queue) for name, w in writers.items()}
        feeders: dict[int, _Splitter | _Demux] = {}
        for fd, kind in sources:
            feeders[fd] = _Demux(splitters) if kind == "mux" else splitters[kind]
            if chunks is None:
                os.set_blocking(fd, True)
                sel.register(fd, selectors.EVENT_READ)
        if watch_fd is not None:
            sel.register(watch_fd, selectors.EVENT_READ)
        if ready_fd is not None:
            _say_ready(ready_fd)
        try:
            _read_until_closed(sel, feeders, watch_fd, chunks)
        finally:
            if presence is not None:
                presence.close()
        _drain(splitters, writers)


def _say_ready(ready_fd: int) -> None:
    """Tell the kit the reader waits on its sources, so it starts the program."""
    try:
        os.write(ready_fd, b"1")
    except BrokenPipeError:
        # the kit died while starting this reader: no program was started, and the
        # streams close with the kit's last copies; nothing is lost by reading on
        pass
    os.close(ready_fd)


def _read_until_closed(
    sel: selectors.BaseSelector,
    feeders: dict[int, _Splitter | _Demux],
    watch_fd: int | None,
    chunks: stamper.Chunks | None = None,
) -> None:
    """Stamp each chunk as it is read, until every source closes; end the run's group should
    the kit's watch pipe close first. With `chunks`, the compiled stamper reads the sources
    and this process reads its records: the stamp was taken in C as the read returned, so
    this process's own turn on a busy CPU, and its threads' turns at the interpreter lock,
    delay a chunk's writing, never its stamp; and it gathers (`_Nap`)."""
    open_fds = set(feeders)
    watched = b""
    nap = _Nap(watch_fd) if chunks is not None else None
    while open_fds:
        for key, _ in sel.select():
            fd = key.fd
            if fd == watch_fd:
                said = os.read(fd, 64)
                watched += said
                if nap is not None:
                    nap.watched(watched, said)
                if not said:
                    sel.unregister(fd)
                    _end_group(watched)
                continue
            got = 0
            for source, stamp_ns, chunk in chunks.read() if chunks else _read_one(fd):
                got += len(chunk)
                if chunk:
                    feeders[source].feed(chunk, stamp_ns)
                elif source in open_fds:
                    if chunks is None:
                        sel.unregister(source)
                    open_fds.discard(source)
                    feeders[source].close(stamp_ns)
            if nap is not None and open_fds and got < GATHER_BELOW:
                nap.take()
    if chunks is not None:
        chunks.close()
    if nap is not None:
        nap.close()


class _Nap:
    """The pause between two reads of the stamper's records (GATHER_S), cut short by the
    program's end (a pidfd of the process the kit's watch names), after which there is none,
    so a run's end is read at once; and by the kit's watch closing (the kit died)."""

    def __init__(self, watch_fd: int | None) -> None:
        self._sel = selectors.DefaultSelector()
        self._watch = watch_fd
        self._pidfd: int | None = None
        self._ended = False
        if watch_fd is not None:
            self._sel.register(watch_fd, selectors.EVENT_READ)

    def watched(self, watched: bytes, said: bytes) -> None:
        """What the kit's watch said so far: the program's pid on its first line; nothing
        more when it closed."""
        if not said and self._watch is not None:
            self._sel.unregister(self._watch)
            self._watch = None
        first = watched.split(b"\n", 1)
        if self._pidfd is None and not self._ended and len(first) == 2 and first[0].isdigit():
            try:
                self._pidfd = os.pidfd_open(int(first[0]))
            except ProcessLookupError:  # it has ended already
                self._ended = True
                return
            except (OSError, AttributeError):  # no pidfd here (Linux < 5.3): naps end on time
                return
            self._sel.register(self._pidfd, selectors.EVENT_READ)

    def take(self) -> None:
        if self._ended:
            return
        for key, _ in self._sel.select(GATHER_S):
            if key.fd == self._pidfd:
                self._ended = True

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
        self._sel.close()


def _read_one(fd: int) -> list[tuple[int, int, bytes]]:
    """What arrived on a source, stamped as its read returns (b"": the source closed)."""
    try:
        chunk = os.read(fd, _READ_SIZE)
    except ConnectionResetError:
        chunk = b""
    return [(fd, time.monotonic_ns(), chunk)]


def _drain(splitters: dict[str, _Splitter], writers: dict[str, _Writer]) -> None:
    """Close the streams' last lines, and wait until the writers hold every line on disk."""
    for s in splitters.values():
        s.close(time.monotonic_ns())
    for w in writers.values():
        w.queue.put(None)
    for w in writers.values():
        w.join()
    for w in writers.values():
        if w.error is not None:
            raise w.error


def check_written(reader: subprocess.Popen, log_dir: Path) -> None:
    """Raise the OSError that kept an ended reader from writing its logs in `log_dir`."""
    code = reader.returncode
    if code is not None and WRITE_FAILED < code < 256:
        number = code - WRITE_FAILED
        raise OSError(number, os.strerror(number), str(log_dir))


def _end_group(watched: bytes) -> None:
    """The kit is gone: SIGKILL the run's process group it named, if it named one."""
    for line in watched.split(b"\n"):
        if line.strip().isdigit():
            try:
                os.killpg(int(line), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


# The reader process, one a run: the kit's interpreter without `site` (-S), which would load
# every .pth file of the environment (an editable install's import hook among them); it needs
# only the standard library and this package, which _reader_env puts on its PYTHONPATH.
READER = (sys.executable, "-S", "-m", "kit.measure.clock")


def start_reader(
    sources: list[tuple[int, str]],
    stdout_path: Path,
    stderr_path: Path,
    watch_fd: int | None = None,
    stderr_cap: int | None = None,
) -> subprocess.Popen:
    """Start the reader process on inherited descriptors and wait until it is reading.

    The caller closes its own copies of the descriptors afterwards.
    """
    spec = ",".join(f"{fd}:{kind}" for fd, kind in sources)
    ready_r, ready_w = os.pipe()
    argv = [*READER, spec, str(stdout_path), str(stderr_path)]
    argv += ["--ready-fd", str(ready_w)]
    if stderr_cap:
        argv += ["--stderr-cap", str(stderr_cap)]
    passed = [fd for fd, _ in sources] + [ready_w]
    if watch_fd is not None:
        argv += ["--watch-fd", str(watch_fd)]
        passed.append(watch_fd)
    env = _reader_env()
    try:
        # a session of its own: the reader outlives a kill of the kit's whole group, to end the
        # run's group through its watch and to keep the program's last lines
        reader = subprocess.Popen(
            argv, pass_fds=passed, env=env, stdin=subprocess.DEVNULL, start_new_session=True
        )
    finally:
        os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        if ready.read(1) != b"1":
            reader.wait()
            check_written(reader, stdout_path.parent)  # a log it could not open
            raise RuntimeError(f"the outside clock's reader failed to start ({reader.returncode})")
    return reader


# "1": the reader thread real-time where it is the machine's one reader (a machine measured
# alone, e.g. a rented one); else ordinary
REALTIME_ENV = "MICAKIT_READER_REALTIME"


def _never_starved() -> None:
    """Best effort: the reader wakes first when a line arrives, however busy the machine.

    A real-time priority (root, or CAP_SYS_NICE) makes the kernel run the reader the moment
    its pipe becomes readable; it only ever blocks in select, so it cannot hog a core.
    Elsewhere a higher nice value is the fallback, and plain priority the last resort.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        return
    except (OSError, AttributeError):
        pass
    try:
        os.nice(-10)
    except OSError:
        pass


class PendingReader:
    """A reader process started before its sources exist, handed them later (SCM_RIGHTS).

    The Docker executor keeps one ready between runs, so a run waits neither for the reader's
    own start-up (a Python process) nor for its readiness: the reader is already waiting.
    """

    def __init__(self) -> None:
        self._sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        argv = [*READER, "-", "-", "-"]
        argv += ["--receive-fd", str(child.fileno())]
        try:
            self.proc = subprocess.Popen(
                argv, pass_fds=[child.fileno()], env=_reader_env(), stdin=subprocess.DEVNULL
            )
        finally:
            child.close()

    def hand(
        self,
        sources: list[tuple[int, str]],
        stdout_path: Path,
        stderr_path: Path,
        stderr_cap: int | None = None,
    ) -> subprocess.Popen:
        """Give the reader its sources and logs, and wait until it reads them; the caller
        closes its own copies of the descriptors afterwards."""
        message = json.dumps(
            {
                "kinds": [kind for _, kind in sources],
                "logs": [str(stdout_path), str(stderr_path)],
                "stderr_cap": stderr_cap,
            }
        ).encode()
        socket.send_fds(self._sock, [message], [fd for fd, _ in sources])
        ready = self._sock.recv(1)
        self._sock.close()
        if ready != b"1":
            self.proc.wait()
            check_written(self.proc, stdout_path.parent)  # a log it could not open
            code = self.proc.returncode
            raise RuntimeError(f"the outside clock's reader failed to start ({code})")
        return self.proc

    def cancel(self) -> None:
        """No sources after all: the reader sees its control socket close and exits."""
        self._sock.close()
        self.proc.wait()


def _reader_env() -> dict[str, str]:
    from importlib import resources  # lazy: the reader process itself needs none of it

    env = dict(os.environ)
    kit_root = str(Path(str(resources.files("kit"))).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (kit_root, env.get("PYTHONPATH")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kit.measure.clock", description=__doc__)
    parser.add_argument("sources", help="FD:KIND[,FD:KIND...], KIND one of stdout, stderr, mux")
    parser.add_argument("stdout_log", type=Path)
    parser.add_argument("stderr_log", type=Path)
    parser.add_argument("--ready-fd", type=int, default=None)
    parser.add_argument("--receive-fd", type=int, default=None)
    parser.add_argument("--watch-fd", type=int, default=None)
    parser.add_argument("--stderr-cap", type=int, default=None)
    args = parser.parse_args(argv)
    # Ctrl-C reaches the whole process group; the reader keeps reading until the streams
    # close, so the program's last lines are kept whatever stopped it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sources = []
    ready_fd = args.ready_fd
    if args.receive_fd is not None:
        # PendingReader: the sources arrive over the control socket; ready goes back on it
        control = socket.socket(fileno=args.receive_fd)
        message, fds, _, _ = socket.recv_fds(control, 1 << 16, 16)
        if not fds:
            return 0  # cancelled, or the kit ended before a run needed this reader
        request = json.loads(message)
        sources = list(zip(fds, request["kinds"], strict=True))
        args.stdout_log, args.stderr_log = (Path(p) for p in request["logs"])
        args.stderr_cap = request.get("stderr_cap")
        ready_fd = os.dup(control.fileno())
        control.close()
    else:
        for item in args.sources.split(","):
            fd, _, kind = item.partition(":")
            if kind not in (STDOUT, STDERR, "mux"):
                parser.error(f"unknown source kind {kind!r}")
            sources.append((int(fd), kind))
    try:
        stamp(sources, args.stdout_log, args.stderr_log, ready_fd, args.watch_fd, args.stderr_cap)
    except OSError as e:
        # a log it could not write (a full disk): said by its exit status alone, and said to
        # the user once, by the kit (check_written), never as this process's traceback
        if e.errno is None:
            raise
        return WRITE_FAILED + e.errno
    return 0


if __name__ == "__main__":
    sys.exit(main())
