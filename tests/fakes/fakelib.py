"""The shared loop of the fake training programs: steps at a set pace, lines as the sides print.

Behaviour comes from the environment variable MICAKIT_FAKE, a JSON object:
  step_ms   {variant: milliseconds per step}, "*" for any other (default 2.0: twice the
            own-clock gap above which kit.measure.timing counts a line that came at once as
            a burst, so a reader a busy machine lets read late seldom sees one)
  events    {"variant#k": event}: what the k-th start (1-based) of that variant does;
            "variant#*" for every start. Events: oom, crash, malformed, drift (its own
            clock 25% fast), empty, nan-loss, bad-loss, out-of-order, missing-window-end,
            sleep-forever,
            hang-midway (prints its first half, then sleeps), slow (20 times its pace),
            fill-disk (first writes the file `fill` names until its disk is full);
            and a contender that games the contract (D4): past-steps (trains twice the
            steps it is asked), clock-backwards (its own clock halved at the halfway step),
            stderr-flood (about 2 MB of warnings on stderr before it trains, and one line after)
  state     a folder where the fakes count their starts (needed for "#k" events); a run of a
            series counts in its side's compiler cache instead (the folder above
            $TRITON_CACHE_DIR, which the kit gives every run of a series, kit.executors.local
            CACHE_ENV): a confined run can write nowhere else that lasts beyond it
  fill      a file the fill-disk event grows until its disk is full
  info_s    seconds the contender takes to answer `+mica info -mica` (default 0)
  offset    {variant: [from_step, amount]}: every loss of that variant from that step on is
            moved by amount (a contender that trains another model, for §7's checks)

Losses (§7's checks need curves that agree where the sides read the same inputs):
  training  4.2 exp(-step/300) + 0.5, plus, from a shared start (method B), the mean |weight| of
            lm_head.weight and a term of the step's batch offsets: both sides print the same
            digits only when they read the same init weights and the same batch order
  evaluated the training curve - 0.5, plus a seed's jitter of at most 0.02; the contender's
            jitter is its next seed's, so five seeds in a row give both sides the same medians
"""

from __future__ import annotations

import errno
import json
import math
import os
import sys
import time
from pathlib import Path


def settings() -> dict:
    return json.loads(os.environ.get("MICAKIT_FAKE", "{}"))


def start_number(cfg: dict, variant: str) -> int:
    state = cfg.get("state")
    if not state:
        return 1
    if os.environ.get("TRITON_CACHE_DIR"):
        state = str(Path(os.environ["TRITON_CACHE_DIR"]).parent / "fake-state")
    folder = Path(state) / variant.replace("/", "_")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        # a run that cannot reach the state folder (a side that does not mount it under
        # Docker, kit.sides.side: each side writes only its own folder) counts as a first start
        return 1
    n = len(list(folder.iterdir())) + 1
    try:
        (folder / str(n)).touch()
    except OSError:
        # a timed run reads its products folder only (amendment 4.3): its start is not counted
        pass
    return n


def event_for(cfg: dict, variant: str, n: int) -> str | None:
    events = cfg.get("events", {})
    return events.get(f"{variant}#{n}") or events.get(f"{variant}#*")


def fill(path: Path) -> None:
    """Grow `path` until its disk has not one byte left."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    block = b"\0" * (1 << 16)
    try:
        while True:
            os.write(fd, block)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


def base_loss(step: int) -> float:
    return 4.2 * math.exp(-step / 300) + 0.5


def seed_jitter(seed: int, shift: int) -> float:
    """Each seed its own evaluated curve; shift 1 (the contender) takes its next seed's."""
    return 0.01 * ((seed + shift) % 5 - 2)


def init_term(weights) -> float:
    """What the shared start's weights add to every loss: their mean |value| (numpy array)."""
    import numpy as np

    return float(np.abs(np.asarray(weights, dtype=np.float64)).mean())


def batch_term(order, step: int) -> float:
    """What step's batch adds to its loss: its offsets' sum, folded small."""
    return float(int(order[step].sum()) % 997) / 1e5


def offset_at(cfg: dict, variant: str, step: int) -> float:
    from_step, amount = cfg.get("offset", {}).get(variant, [0, 0.0])
    return float(amount) if step >= int(from_step) else 0.0


def train(
    variant: str,
    steps: int,
    line,
    oom_message: str,
    *,
    log_every: int = 10,
    loss_format: str = ".4f",
    extra_loss=None,
    eval_every: int = 0,
    eval_line=None,
    seed: int = 1337,
    seed_shift: int = 0,
    batch: int = 64,
) -> int:
    """Run `steps` steps; `line(step, loss_text, own_ms, step_ms)` formats a log line.

    `extra_loss(step)` adds to the training loss (method B's shared start); every `eval_every`
    steps `eval_line(step, train_loss, val_loss)` is printed before the step's line, as
    nanoGPT's evaluations are.
    """
    cfg = settings()
    n = start_number(cfg, variant)
    event = event_for(cfg, variant, n)
    pace = cfg.get("step_ms", {})
    step_ms = float(pace.get(variant, pace.get("*", 2.0)))
    drift = 1.25 if event == "drift" else 1.0  # its own clock a quarter fast
    if event == "slow":
        step_ms *= 20
    if event == "empty":
        return 0
    if event == "fill-disk":
        fill(Path(cfg["fill"]))
    if batch > int(cfg.get("max_batch", batch)):
        # amendment 5.1's case: this batch does not fit whatever the mode
        print(oom_message, file=sys.stderr, flush=True)
        return 1
    if event == "stderr-flood":
        for k in range(30000):  # a program that warns at length: its stderr is capped
            print(f"warning {k:06d}: " + "x" * 50, file=sys.stderr)
        sys.stderr.flush()
    if event == "sleep-forever":
        print("started", flush=True)
        time.sleep(3600)
    mid = (steps // 20) * 10  # events happen halfway, whatever the number of steps
    start = time.monotonic()
    last = start
    trained = 2 * steps if event == "past-steps" else steps
    for step in range(trained + 1):
        if step:
            # a steady pace: sleep to the step's deadline, so the rate does not depend on load
            deadline = start + step * step_ms / 1e3
            time.sleep(max(0.0, deadline - time.monotonic()))
        if event == "oom" and step == mid:
            print(oom_message, file=sys.stderr, flush=True)
            return 1
        if event == "hang-midway" and step == mid:
            time.sleep(3600)
        if event == "crash" and step == mid:
            print("Segmentation fault (core dumped)", file=sys.stderr, flush=True)
            return 139
        moved = offset_at(cfg, variant, step)
        if eval_every and eval_line and step % eval_every == 0:
            val = base_loss(step) - 0.5 + seed_jitter(seed, seed_shift) + moved
            print(eval_line(step, val, val), flush=True)
        if step % log_every:
            continue
        if event == "missing-window-end" and step == steps:
            continue
        now = time.monotonic()
        own_ms = (now - start) * 1e3 * drift
        if event == "clock-backwards" and step == mid:
            own_ms /= 2  # the window's ends still agree: only this line goes back
        loss = base_loss(step) + moved + (extra_loss(step) if extra_loss else 0.0)
        loss_text = format(loss, loss_format)
        shown_step = step
        if event == "out-of-order" and step == mid:
            shown_step = mid - 20
        text = line(shown_step, loss_text, own_ms, (now - last) * 1e3 / max(log_every, 1))
        if event == "nan-loss" and step == mid:
            text = text.replace(loss_text, "nan", 1)
        if event == "bad-loss" and step == mid:
            text = text.replace(loss_text, "l0ss", 1)
        if event == "malformed" and step == mid:
            text = text[: len(text) // 2]
        last = now
        print(text, flush=True)
    if event == "stderr-flood":
        print("the last warning", file=sys.stderr, flush=True)
    return 0
