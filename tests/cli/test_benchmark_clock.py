"""benchmarks/kit/clock.py: a line the probe held (its write returned long after its clock
reading) is counted as the probe's and left out of the reader's p99, and the benchmark runs as
docs/benchmarks.md gives it (one repeat here), its columns and goal printed."""

import importlib.util
import shutil

import pytest

from tests.conftest import ROOT, run_benchmark

BENCHMARK = ROOT / "benchmarks" / "kit" / "clock.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("clock_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _log(tmp_path, late: range, late_ms: float, held: bool):
    """401 probe lines 5 ms apart, each stamped 0.05 ms after its clock reading, but the lines
    `late`, stamped `late_ms` after it; `held`: their write returned only then (the probe's
    delay), else 0.01 ms after the reading (the reader's)."""
    rows, after = [], 0
    for i in range(401):
        now = 1_000_000_000 + i * 5_000_000
        stamp = now + (int(late_ms * 1e6) if i in late else 50_000)
        rows.append(f"{stamp} {i} {now} {after}")
        after = stamp + 1_000 if held and i in late else now + 10_000
    path = tmp_path / "stdout.log"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_line_the_probe_held_is_the_probes_not_the_readers(tmp_path):
    clock = _benchmark()
    # six lines of 401 late: more than 1%, so the plain p99 is theirs
    row = clock.delays(_log(tmp_path, range(200, 206), 4.0, held=True))
    assert row["lines"] == 401
    assert row["p99_ms"] == pytest.approx(4.0) and row["max_ms"] == pytest.approx(4.0)
    assert row["held_lines"] == 6
    assert row["reader_p99_ms"] == pytest.approx(0.05)
    # the same lines written at once and stamped late: the reader's delay, kept in its p99
    row = clock.delays(_log(tmp_path, range(200, 206), 4.0, held=False))
    assert row["held_lines"] == 0
    assert row["reader_p99_ms"] == pytest.approx(4.0)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the floor reader")
def test_the_benchmark_runs_and_prints_the_readers_share_and_its_goal():
    proc = run_benchmark("clock.py", "--repeats", 1, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for word in ("floor", "kit", "reader_p99_worst_ms", "held_lines_max", "goal: kit p99"):
        assert word in proc.stdout, proc.stdout
