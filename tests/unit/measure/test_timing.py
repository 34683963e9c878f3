import dataclasses
from pathlib import Path

import pytest

from kit.measure import timing
from kit.protocol.load import load

P = load()
T = P.timing


def write_log(path: Path, lines: list[tuple[int, str]]) -> Path:
    path.write_bytes(b"".join(b"%d %s\n" % (t, s.encode()) for t, s in lines))
    return path


def contender_lines(step_ns: int = 2_000_000, own_factor: float = 1.0, t0: int = 10**12):
    out = []
    for step in range(0, 401, 10):
        t = t0 + step * step_ns
        out.append(
            (
                t,
                f"step {step} loss {4 - step / 200:.4f} time_ms {step * step_ns / 1e6 * own_factor:.4f}",
            )
        )
    return out


def judge(tmp_path, out, err=(), code=0, grammar=None):
    o = write_log(tmp_path / "stdout.log", list(out))
    e = write_log(tmp_path / "stderr.log", list(err))
    return timing.judge(o, e, code, grammar or P.contender, T)


def test_step_time_is_window_over_300_steps(tmp_path):
    r = judge(tmp_path, contender_lines(step_ns=2_000_000))
    assert r.status == timing.OK
    assert r.step_s == pytest.approx(0.002, rel=1e-12)
    assert r.own_step_s == pytest.approx(0.002, rel=1e-9)
    assert r.last_step == 400


def test_only_the_two_window_stamps_count(tmp_path):
    lines = contender_lines()
    # move a line inside the window: the step time must not change
    lines[20] = (lines[20][0] + 123456, lines[20][1])
    base = judge(tmp_path, contender_lines()).step_s
    assert judge(tmp_path, lines).step_s == base


def test_cross_check_voids_at_more_than_one_percent(tmp_path):
    r = judge(tmp_path, contender_lines(own_factor=1.011))
    assert r.status == timing.VOID and "1.10% apart" in r.reason
    assert r.step_s == pytest.approx(0.002)
    assert judge(tmp_path, contender_lines(own_factor=1.0099)).status == timing.OK


def test_missing_window_line(tmp_path):
    lines = [x for x in contender_lines() if " step 400 " not in f" {x[1]} "]
    r = judge(tmp_path, lines)
    assert r.status == timing.FAILED and "no line for step 400" in r.reason
    lines = [x for x in contender_lines() if not x[1].startswith("step 100 ")]
    assert "no line for step 100" in judge(tmp_path, lines).reason


def test_steps_out_of_order(tmp_path):
    lines = contender_lines()
    lines[5] = (lines[5][0], lines[5][1].replace("step 50 ", "step 30 "))
    r = judge(tmp_path, lines)
    assert r.status == timing.FAILED and "step 30 comes after step 40" in r.reason


def test_loss_not_a_number(tmp_path):
    lines = contender_lines()
    lines[5] = (lines[5][0], "step 50 loss l0ss time_ms 100.0")
    r = judge(tmp_path, lines)
    assert r.status == timing.FAILED and "the loss 'l0ss' at step 50 is not a number" in r.reason


def test_nan_loss_at_the_end_is_a_failure(tmp_path):
    lines = contender_lines()
    lines[-1] = (lines[-1][0], "step 400 loss nan time_ms 800.0")
    assert "loss at step 400 is nan" in judge(tmp_path, lines).reason


def test_empty_output(tmp_path):
    r = judge(tmp_path, [])
    assert r.status == timing.FAILED and "printed nothing" in r.reason


def test_out_of_memory_needs_the_line_and_a_nonzero_exit(tmp_path):
    err = [(1, "mica: cuMemAlloc failed: out of memory")]
    r = judge(tmp_path, contender_lines()[:3], err, code=1)
    assert r.status == timing.OOM and "out of memory" in r.reason
    r = judge(tmp_path, contender_lines()[:3], [(1, "segfault")], code=139)
    assert r.status == timing.FAILED and r.reason == "exit code 139"


def test_pytorch_oom_messages(tmp_path):
    for msg in (
        "torch.OutOfMemoryError: CUDA out of memory.",
        "RuntimeError: CUDA error: out of memory",
    ):
        r = judge(tmp_path, [], [(1, msg)], code=1, grammar=P.pytorch)
        assert r.status == timing.OOM


def test_nanogpt_lines_and_its_own_time_recorded_not_compared(tmp_path):
    lines = [
        (
            10**9 + s * 3_000_000,
            f"iter {s}: loss 3.0000, time {50.0 if s == 200 else 30.0:.2f}ms, mfu 1.00%",
        )
        for s in range(0, 401, 10)
    ]
    lines.insert(0, (10**9 - 5, "step 0: train loss 4.2000, val loss 4.2000"))
    r = judge(tmp_path, lines, grammar=P.pytorch)
    assert r.status == timing.OK
    assert r.step_s == pytest.approx(0.003)
    assert r.own_step_s == pytest.approx(0.030)  # the median of its own field: never compared


def test_unfinished_run(tmp_path):
    assert judge(tmp_path, contender_lines(), code=None).status == timing.FAILED


# the messages PyTorch, the CUDA runtime and driver, cuBLAS and cuDNN print when the card's memory
# runs out, each as the program's last words before an exit status
REAL_PYTORCH_OOM = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
    "capacity of 23.64 GiB of which 1.12 GiB is free.",
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total "
    "capacity; 6.31 GiB already allocated)",
    "RuntimeError: CUDA error: out of memory",
    "RuntimeError: CUDA driver error: out of memory",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "cudaErrorMemoryAllocation: out of memory",
    "triton.runtime.errors: CUDA_ERROR_OUT_OF_MEMORY",
]


@pytest.mark.parametrize("msg", REAL_PYTORCH_OOM)
def test_real_cuda_out_of_memory_messages_are_in_pytorchs_grammar(tmp_path, msg):
    r = judge(
        tmp_path,
        [],
        [(1, "Traceback (most recent call last):"), (2, msg)],
        code=1,
        grammar=P.pytorch,
    )
    assert r.status == timing.OOM, msg
    assert r.reason == msg[:200]


@pytest.mark.parametrize(
    "msg",
    [
        "no retry when out of memory",  # words, not the allocator's message
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "checking CUDA memory: 3.1 GiB free",
    ],
)
def test_other_lines_are_no_pytorch_out_of_memory(tmp_path, msg):
    r = judge(tmp_path, [], [(1, msg)], code=1, grammar=P.pytorch)
    assert r.status == timing.FAILED and r.reason == "exit code 1"


@pytest.mark.parametrize("grammar", [P.contender, P.pytorch])
def test_death_by_signal_is_never_out_of_memory(tmp_path, grammar):
    # a program killed by SIGSEGV after printing an out-of-memory line
    err = [(1, "mica: cuMemAlloc failed: out of memory"), (2, REAL_PYTORCH_OOM[0])]
    r = judge(tmp_path, contender_lines()[:3], err, code=-11, grammar=grammar)
    assert r.status == timing.FAILED
    assert r.reason == "killed by SIGSEGV (11)"
    # the same lines and an exit status: out of memory
    assert judge(tmp_path, contender_lines()[:3], err, code=1, grammar=grammar).status == timing.OOM


def test_a_run_the_kit_stopped_fails_with_the_reason(tmp_path):
    o = write_log(tmp_path / "stdout.log", contender_lines())
    e = write_log(tmp_path / "stderr.log", [])
    r = timing.judge(o, e, -9, P.contender, T, stopped="stalled: no line")
    assert r.status == timing.FAILED and r.reason == "stalled: no line"


def buffered_lines(lines: list[tuple[int, str]], block: int) -> list[tuple[int, str]]:
    """The lines as a block-buffered stdout lets them out: `block` at a time, each block
    stamped when its last line was written (one read of the pipe, one stamp)."""
    out = []
    for i in range(0, len(lines), block):
        group = lines[i : i + block]
        out += [(group[-1][0] + k, text) for k, (_, text) in enumerate(group)]
    return out


def test_buffered_output_is_void_with_its_fix(tmp_path):
    r = judge(tmp_path, buffered_lines(contender_lines(), block=8))
    assert r.status == timing.VOID and r.step_s is None  # the stamps timed the bursts
    assert timing.is_buffered(r.reason)
    # the window's 31 lines (steps 100 to 400): 30 after its first, 26 of them in a burst
    assert "its output is buffered: 26 of 30 step lines arrived in bursts" in r.reason
    assert "§5 needs every line to leave when written" in r.reason
    assert "stdbuf -oL" in r.reason and "+mica stdout=line -mica" in r.reason


def test_buffered_nanogpt_is_void_too(tmp_path):
    lines = [
        (10**9 + s * 3_000_000, f"iter {s}: loss 3.0000, time 3.00ms, mfu 1.00%")
        for s in range(0, 401, 10)
    ]
    r = judge(tmp_path, buffered_lines(lines, block=40), grammar=P.pytorch)
    assert r.status == timing.VOID and timing.is_buffered(r.reason)
    assert judge(tmp_path, lines, grammar=P.pytorch).status == timing.OK


def test_a_program_whose_steps_take_no_time_is_not_buffered(tmp_path):
    # lines 5 µs apart, and its own clock says so: nothing was held back
    r = judge(tmp_path, contender_lines(step_ns=500))
    assert r.status == timing.OK, r.reason


def test_a_late_reader_now_and_then_is_not_buffered(tmp_path):
    # the reader read two lines at once a few times (a busy machine): not a buffered program
    lines = contender_lines()
    for i in (12, 20, 33):
        lines[i] = (lines[i + 1][0] - 1, lines[i][1])
    held, told = timing.bursts(
        timing.step_lines([timing.StampedLine(t, s) for t, s in lines], P.contender, "x")[10:],
        P.contender,
    )
    assert (held, told) == (3, 30)
    assert judge(tmp_path, lines).status == timing.OK


PER_STEP = dataclasses.replace(P.contender, own_clock="per_step")


def per_step_lines(step_ms: float, window_pause_ms: float = 0.0, every: int = 1):
    """A contender that prints each step's own time, at every `every` steps; a pause it does
    not count (an evaluation) before step 250."""
    out, t = [], 10**12
    for step in range(0, 401):
        t += int(step_ms * 1e6) + (int(window_pause_ms * 1e6) if step == 250 else 0)
        if step % every == 0:
            out.append((t, f"step {step} loss 3.0000 time_ms {step_ms:.4f}"))
    return out


def test_a_per_step_own_clock_is_cross_checked_by_its_sum(tmp_path):
    r = judge(tmp_path, per_step_lines(2.0), grammar=PER_STEP)
    assert r.status == timing.OK, r.reason
    assert r.own_step_s == pytest.approx(0.002)
    # an evaluation inside the window that its step times leave out: 10% more by the stamps
    r = judge(tmp_path, per_step_lines(2.0, window_pause_ms=60.0), grammar=PER_STEP)
    assert r.status == timing.VOID and "apart, more than 1%" in r.reason


def test_a_per_step_own_clock_needs_a_time_on_every_step_of_the_window(tmp_path):
    r = judge(tmp_path, per_step_lines(2.0, every=10), grammar=PER_STEP)
    assert r.status == timing.VOID
    assert "needs a time on every step from 101 to 400: 30 of 300 have one" in r.reason


def test_step_lines_past_the_protocols_last_step_fail_the_run(tmp_path):
    # a contender asked for 400 steps that trains 800: another run than the one measured
    lines = contender_lines()
    t = lines[-1][0]
    lines += [
        (t + k * 20_000_000, f"step {400 + 10 * k} loss 1.0000 time_ms {800 + 20 * k}.0")
        for k in range(1, 41)
    ]
    r = judge(tmp_path, lines)
    assert r.status == timing.FAILED
    assert "step 410, past the protocol's last step 400" in r.reason
    assert "the last step line was 800" in r.reason
    assert r.final_loss is None and r.step_s is None
    assert judge(tmp_path, contender_lines()).status == timing.OK


@pytest.mark.parametrize("where", [100, 200, 390])
def test_a_non_finite_loss_anywhere_in_the_window_fails_the_run(tmp_path, where):
    lines = contender_lines()
    i = where // 10
    for bad in ("nan", "inf", "-inf"):
        lines[i] = (lines[i][0], lines[i][1].replace(lines[i][1].split()[3], bad, 1))
        r = judge(tmp_path, lines)
        assert r.status == timing.FAILED, bad
        assert f"the loss at step {where} is {float(bad)}" in r.reason


def test_a_non_finite_loss_before_the_window_is_not_judged_by_it(tmp_path):
    lines = contender_lines()
    lines[5] = (lines[5][0], "step 50 loss nan time_ms 100.0000")
    assert judge(tmp_path, lines).status == timing.OK


@pytest.mark.parametrize(
    ("own", "how"),
    [
        (300.0, "goes backwards at step 300: 300 ms"),
        (-1.0, "goes backwards at step 300: -1 ms"),
        (1192.0, "stands still at step 300"),
    ],
)
def test_a_cumulative_own_clock_that_does_not_rise_voids_the_run(tmp_path, own, how):
    # the cumulative reading is compared at steps 100 and 400 only: halved, negative or
    # standing at step 300, the ends still agree, but no clock goes back
    lines = contender_lines(step_ns=4_000_000)
    lines[30] = (lines[30][0], f"step 300 loss 2.5000 time_ms {own}")
    if own == 1192.0:
        lines[29] = (lines[29][0], "step 290 loss 2.5500 time_ms 1192.0")
    r = judge(tmp_path, lines)
    assert r.status == timing.VOID
    assert how in r.reason, r.reason
    assert r.own_step_s is None


def test_a_per_step_own_clock_at_zero_or_below_voids_the_run(tmp_path):
    lines = per_step_lines(2.0)
    lines[300] = (lines[300][0], "step 300 loss 3.0000 time_ms -2.0000")
    lines[301] = (lines[301][0], "step 301 loss 3.0000 time_ms 6.0000")  # the sum still agrees
    r = judge(tmp_path, lines, grammar=PER_STEP)
    assert r.status == timing.VOID
    assert "reads -2 ms for step 300" in r.reason


def test_nanogpts_own_clock_is_never_judged(tmp_path):
    # nanoGPT's per-step time is recorded, never compared (§5): a reading of 0 changes nothing
    out = [
        (
            10**12 + step * 10**6,
            f"iter {step}: loss 3.0000, time {0.0 if step == 200 else 1.0}ms, mfu 1.00%",
        )
        for step in range(0, 401, 10)
    ]
    assert judge(tmp_path, out, grammar=P.pytorch).status == timing.OK
