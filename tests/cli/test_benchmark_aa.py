"""benchmarks/kit/aa.py runs as the README gives it (its case (a), the one needing no nanoGPT),
so a change to the series' options cannot leave the benchmark broken unnoticed. The case's
protocol is the kit's own, which pins tiny Shakespeare's SHA-256 (D2): without it (a plain
clone, no ../shared beside it and no MICAKIT_INPUT) the test skips, saying so."""

from tests.conftest import REAL_INPUT, needs_real_input, run_benchmark


@needs_real_input
def test_the_sleep_case_runs_and_prints_its_ratio_and_goal():
    proc = run_benchmark("aa.py", "--case", "sleep", "--runs", 2, "--input", REAL_INPUT)
    assert proc.returncode == 0, proc.stderr
    assert "sleep: " in proc.stdout and "A/A ratio" in proc.stdout, proc.stdout
    assert "goal (ratio within 0.2% of 1, every round within 1%): " in proc.stdout, proc.stdout
