"""The shared loop of the fake training programs: steps at a set pace, lines as the sides print.

Behaviour comes from the environment variable MICAKIT_FAKE, a JSON object:
  step_ms   {variant: milliseconds per step}, "*" for any other (default 1.0)
  events    {"variant#k": event}: what the k-th start (1-based) of that variant does;
            "variant#*" for every start. Events: oom, crash, malformed, drift, empty,
            nan-loss, bad-loss, out-of-order, missing-window-end, sleep-forever
  state     a folder where the fakes count their starts (needed for "#k" events)
"""

from __future__ import annotations

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
    folder = Path(state) / variant.replace("/", "_")
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.iterdir())) + 1
    (folder / str(n)).touch()
    return n


def event_for(cfg: dict, variant: str, n: int) -> str | None:
    events = cfg.get("events", {})
    return events.get(f"{variant}#{n}") or events.get(f"{variant}#*")


def train(variant: str, steps: int, line, oom_message: str) -> int:
    """Run `steps` steps; `line(step, loss, own_ms, step_ms)` formats a log line."""
    cfg = settings()
    n = start_number(cfg, variant)
    event = event_for(cfg, variant, n)
    pace = cfg.get("step_ms", {})
    step_ms = float(pace.get(variant, pace.get("*", 1.0)))
    drift = 1.05 if event == "drift" else 1.0
    if event == "empty":
        return 0
    if event == "sleep-forever":
        print("started", flush=True)
        time.sleep(3600)
    mid = (steps // 20) * 10  # events happen halfway, whatever the number of steps
    start = time.monotonic()
    last = start
    for step in range(steps + 1):
        if step:
            # a steady pace: sleep to the step's deadline, so the rate does not depend on load
            deadline = start + step * step_ms / 1e3
            time.sleep(max(0.0, deadline - time.monotonic()))
        if event == "oom" and step == mid:
            print(oom_message, file=sys.stderr, flush=True)
            return 1
        if event == "crash" and step == mid:
            print("Segmentation fault (core dumped)", file=sys.stderr, flush=True)
            return 139
        if step % 10:
            continue
        if event == "missing-window-end" and step == steps:
            continue
        now = time.monotonic()
        own_ms = (now - start) * 1e3 * drift
        loss = 4.2 * math.exp(-step / 300) + 0.5
        shown_step = step
        if event == "out-of-order" and step == mid:
            shown_step = mid - 20
        text = line(shown_step, loss, own_ms, (now - last) * 1e3 / 10)
        if event == "nan-loss" and step == mid:
            text = text.replace(f"{loss:.4f}", "nan", 1)
        if event == "bad-loss" and step == mid:
            text = text.replace(f"{loss:.4f}", "l0ss", 1)
        if event == "malformed" and step == mid:
            text = text[: len(text) // 2]
        last = now
        print(text, flush=True)
    return 0
