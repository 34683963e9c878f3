"""Benchmark of the instrument itself (§5's outside clock), not a test.

A probe program writes a line carrying its own `time.monotonic_ns()` every 5 ms, 401 lines
(steps 0..400 of a timing run), with one `os.write` right after its clock reading (the least a
program can do between the two). For every line, the stamp delay is the reader's stamp minus the
probe's own time; the window's step time (lines 100 to 400, 300 intervals) from the stamps is
set against the probe's own reading of the same window.

Each line also carries when the probe's previous write returned. A line whose write returned
more than `AT_ONCE_MS` (0.2 ms) after its clock reading was held by the probe itself (it was
descheduled between the two, on a core a neighbour shares): its delay is the probe's as much
as the reader's. `reader_p99` is the p99 over the lines the probe wrote at once, the reader's
own delay; `held_lines` counts the others. The plain p99 keeps every line.

    python benchmarks/kit/clock.py [--repeats 5] [--interval-ms 5] [--with-sampler]
    python benchmarks/kit/clock.py --neighbours 0 1 2 [--repeats 5]
    python benchmarks/kit/clock.py --faults [--neighbours 1] [--repeats 5]
    python benchmarks/kit/clock.py --neighbours 0 1 2 --ungathered
    python benchmarks/kit/clock.py --neighbours 0 1 2 --print

Every probe run is read three times, paired under the same load: by the kit (the local
executor and its reader process, as a series runs it, stamps taken by the compiled stamper
where it is built), by the kit stamping in Python (`MICAKIT_STAMPER=python`, the fallback), and
by the floor, a plain blocking `read` loop in C (compiled here with the system `cc`) that
stamps each read with CLOCK_MONOTONIC and keeps its lines in memory until the end. The order
of the three is reversed every other repeat.

`--neighbours N ...`: N CPU-bound processes per core, each in a session of its own (as other
users' programs are; one session would share one scheduling group under autogroup), started
before the pair and ended after it; every N given is measured in the one run.
`--faults` adds long lines: no long line, an 8 MB line and a 50 MB line printed just before
step 100 (a line without a newline for megabytes; the reader keeps its first 1 MiB and a
marker), with one neighbour per core unless `--neighbours` says otherwise. The long line is no
step line: delays and agreement are over the step lines.
`--ungathered` adds the kit's reader reading the stamper's records as they come
(`MICAKIT_GATHER_MS=0`, as the reader read them before) beside the kit as shipped, which pauses
`kit.measure.clock.GATHER_S` between reads (cut short when the program ends).
`--print` has the probe print each line as nanoGPT does under `python -u` (its text, then the
newline: two writes) rather than in one write.
`--with-sampler` runs the card sampler (on the recorded fake card, as a series runs it: a thread
of the kit's process, 1 s and 50 ms intervals) during every kit-read probe run.

Goal on a 2-core machine: p99 stamp delay at most 1 ms with one neighbour per core, within
twice the floor's with two; agreement within 0.05% in every case. With neighbours the plain
p99's tail is mostly lines the probe held (`held_lines`); `reader_p99` tells the reader's part.
The load average is printed before and after: the floor is what tells the kit's share from the
machine's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.executors import programs  # noqa: E402
from kit.executors.base import RunSpec  # noqa: E402
from kit.executors.local import LocalExecutor  # noqa: E402
from kit.measure import clock, stamper  # noqa: E402
from kit.measure.stamped import read_stamped  # noqa: E402

PROBE = """
import os, sys, time
interval = float(sys.argv[1]) / 1e3
long_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 0
printed = len(sys.argv) > 3 and sys.argv[3] == "print"
start = time.monotonic()
after = 0
for i in range(401):
    time.sleep(max(0.0, start + i * interval - time.monotonic()))
    if i == 99 and long_bytes:
        sys.stdout.buffer.write(b"z" * long_bytes + b"\\n")
        sys.stdout.flush()
    now = time.monotonic_ns()
    if printed:  # as nanoGPT prints under python -u: the text, then its newline, two writes
        print(f"{i} {now} {after}")
    else:  # one write a line, as the Mica program's stdout=line
        os.write(1, b"%d %d %d\\n" % (i, now, after))
    after = time.monotonic_ns()
"""
SPIN = "while True: pass"

# The floor: the least a reader can do. One blocking read, one clock reading, lines kept in
# memory (their first 63 bytes) and written out only once the stream closes. It asks for the
# real-time priority the kit's reader asks for (kit.measure.clock._never_starved), so the two
# differ in their work alone.
FLOOR_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>
static char buf[1 << 20];
int main(void) {
    struct sched_param rt = {.sched_priority = 1};
    sched_setscheduler(0, SCHED_FIFO, &rt); /* as the kit's reader: where allowed */
    size_t cap = 1 << 20, used = 0, keep = 0;
    char *out = malloc(cap), line[64];
    for (;;) {
        ssize_t got = read(0, buf, sizeof buf);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long now = ts.tv_sec * 1000000000LL + ts.tv_nsec;
        if (got <= 0) break;
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] != '\n') { if (keep < sizeof line - 1) line[keep++] = buf[i]; continue; }
            if (cap - used < 128) { cap *= 2; out = realloc(out, cap); }
            used += snprintf(out + used, cap - used, "%lld %.*s\n", now, (int)keep, line);
            keep = 0;
        }
    }
    fwrite(out, 1, used, stdout);
    return 0;
}
"""

Reader = Callable[[tuple[str, ...], Path], Path]  # probe argv, folder -> its stamped log


def build_floor(folder: Path) -> Path:
    cc = shutil.which("cc")
    if cc is None:
        sys.exit("error: no C compiler (cc) on PATH to build the floor reader\nfix: install one")
    source, binary = folder / "floor.c", folder / "floor"
    source.write_text(FLOOR_C)
    subprocess.run([cc, "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def kit_reader(stamps_in_python: bool = False, gather_ms: str | None = None) -> Reader:
    """The kit's reader, as a series runs it; stamping in Python, or with the pause between
    reads of the stamper's records (MICAKIT_GATHER_MS, kit.measure.clock.GATHER_S) set."""
    said = {stamper.CHOICE_ENV: "python"} if stamps_in_python else {}
    if gather_ms is not None:
        said[clock.GATHER_ENV] = gather_ms

    def read(argv: tuple[str, ...], folder: Path) -> Path:
        before = {k: os.environ.get(k) for k in said}
        os.environ.update(said)
        try:
            # as the kit starts a program (python -u): with --print a line leaves in two writes
            spec = RunSpec("probe", argv, env=programs.ENV)
            return LocalExecutor().run(spec, folder).stdout_log
        finally:
            for k, v in before.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v

    return read


def floor_reader(binary: Path) -> Reader:
    def read(argv: tuple[str, ...], folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "stdout.log"
        r, w = os.pipe()
        with open(log, "wb") as out:
            # a session of its own each, as the kit starts its reader and the program
            reader = subprocess.Popen([str(binary)], stdin=r, stdout=out, start_new_session=True)
        os.close(r)
        probe = subprocess.Popen(
            argv,
            stdout=w,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **programs.ENV},  # as the kit starts a program: python -u
        )
        os.close(w)
        probe.wait()
        reader.wait()
        return log

    return read


# A line the probe wrote at once: its write returned within this long of its clock reading,
# so the line entered the pipe no later than that; a line held longer (the probe descheduled
# between its clock and its write's return) is the probe's own delay, not the reader's.
AT_ONCE_MS = 0.2


def delays(log: Path) -> dict:
    lines = [x for x in read_stamped(log) if not x.text.startswith("z")]
    parts = np.array([x.text.split()[:3] for x in lines], dtype=np.int64)
    written, after = parts[:, 1], parts[:, 2]  # a line's third field: the previous write's end
    stamped = np.array([x.stamp_ns for x in lines], dtype=np.int64)
    delay_ms = (stamped - written) / 1e6
    # how long each write took, from the probe's clock reading to its write's return (the
    # next line says; the last line's is not known, so it is no line written at once)
    held_ms = np.append((after[1:] - written[:-1]) / 1e6, np.inf)
    at_once = delay_ms[held_ms < AT_ONCE_MS]
    outside = (stamped[400] - stamped[100]) / 300
    own = (written[400] - written[100]) / 300
    return {
        "lines": len(lines),
        "p50_ms": float(np.percentile(delay_ms, 50)),
        "p99_ms": float(np.percentile(delay_ms, 99)),
        "max_ms": float(delay_ms.max()),
        "agreement_pct": float(abs(outside - own) / own * 100),
        # the reader's own delay: over the lines the probe wrote at once
        "reader_p99_ms": float(np.percentile(at_once, 99)),
        "held_lines": int(len(lines) - 1 - len(at_once)),
    }


def measure(
    read: Reader, interval_ms: float, folder: Path, long_bytes: int = 0, printed: bool = False
) -> dict:
    argv = (sys.executable, "-c", PROBE, str(interval_ms), str(long_bytes))
    argv += ("print",) if printed else ()
    return delays(read(argv, folder))


@contextlib.contextmanager
def neighbours(per_core: int) -> Iterator[None]:
    cores = os.cpu_count() or 1
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
        for _ in range(per_core * cores)
    ]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "not readable"


def realtime_allowed() -> bool:
    """Whether the kit's reader gets its real-time priority here (root or CAP_SYS_NICE)."""
    code = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


@contextlib.contextmanager
def sampling(folder: Path) -> Iterator[None]:
    # a module of the kit the plain benchmark never needs: loaded only with --with-sampler
    from kit.telemetry.recorded import FakeCard
    from kit.telemetry.sampler import Sampler

    card = FakeCard.from_file(ROOT / "tests/fixtures/nvml/steady_run.json")
    folder.mkdir(parents=True, exist_ok=True)
    with Sampler(card, folder / "samples.jsonl"):
        yield


def run_all(args: argparse.Namespace, longs: list[tuple[str, int]]) -> pd.DataFrame:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        readers = {"floor": floor_reader(build_floor(Path(tmp)))}
        if stamper.available():
            readers["kit"] = kit_reader()
            if args.ungathered:
                readers["kit-ungathered"] = kit_reader(gather_ms="0")
        readers["kit-python"] = kit_reader(stamps_in_python=True)
        for n in args.neighbours:
            for name, size in longs:
                for i in range(args.repeats):
                    order = list(readers) if i % 2 == 0 else list(readers)[::-1]
                    with neighbours(n):
                        for who in order:
                            folder = Path(tmp) / f"{n}-{size}-{i}-{who}"
                            ctx = sampling(folder) if args.with_sampler and who == "kit" else None
                            with ctx or contextlib.nullcontext():
                                row = measure(
                                    readers[who], args.interval_ms, folder, size, args.print
                                )
                            rows.append(
                                {"neighbours": n, "case": name, "reader": who, "repeat": i, **row}
                            )
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    summary = df.groupby(["neighbours", "case", "reader"], sort=False).agg(
        p50_ms=("p50_ms", "median"),
        p99_median_ms=("p99_ms", "median"),
        p99_worst_ms=("p99_ms", "max"),
        max_ms=("max_ms", "max"),
        agreement_worst_pct=("agreement_pct", "max"),
        reader_p99_median_ms=("reader_p99_ms", "median"),
        reader_p99_worst_ms=("reader_p99_ms", "max"),
        held_lines_max=("held_lines", "max"),
    )
    floor = summary.xs("floor", level="reader")["p99_worst_ms"]
    summary["p99_over_floor"] = (
        summary["p99_worst_ms"] / floor.reindex(summary.index.droplevel("reader")).to_numpy()
    )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--interval-ms", type=float, default=5.0)
    parser.add_argument("--with-sampler", action="store_true")
    parser.add_argument(
        "--ungathered",
        action="store_true",
        help="a fourth reader: the kit reading each of the stamper's records as it comes "
        "(MICAKIT_GATHER_MS=0), beside the kit as shipped",
    )
    parser.add_argument("--faults", action="store_true", help="long lines, busy neighbours")
    parser.add_argument(
        "--neighbours",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="CPU-bound processes per core, each N measured (default 0; 1 with --faults)",
    )
    parser.add_argument("--rows", action="store_true", help="print every probe run's row too")
    parser.add_argument(
        "--print",
        action="store_true",
        help="the probe prints as nanoGPT does under python -u (each line's text and its "
        "newline in two writes), not one write a line",
    )
    args = parser.parse_args()
    if args.neighbours is None:
        args.neighbours = [1] if args.faults else [0]
    longs = [("no long line", 0)]
    if args.faults:
        longs += [("8 MB line", 8 << 20), ("50 MB line", 50 << 20)]
    print(f"load average before: {loadavg()}", flush=True)
    print(f"the kit's reader may take a real-time priority here: {realtime_allowed()}")
    df = run_all(args, longs)
    print(f"load average after: {loadavg()}")
    if args.rows:
        print(df.to_string(float_format=lambda x: f"{x:.4f}"))
    print(f"\n{os.cpu_count()} cores, {args.repeats} repeats a case, each read by every reader:")
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(summarise(df).to_string(float_format=lambda x: f"{x:.4f}"))
    print(
        "goal: kit p99 <= 1 ms at 1 neighbour a core, <= 2x the floor's at 2; "
        "agreement <= 0.05% in every case\n"
        f"reader_p99: the p99 over the lines the probe wrote at once (its write returned within "
        f"{AT_ONCE_MS} ms of its clock reading); held_lines: those it did not, its own delay"
    )


if __name__ == "__main__":
    main()
