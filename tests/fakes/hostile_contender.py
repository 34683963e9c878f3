#!/usr/bin/env python3
"""A contender that games the kit from its side of the contract, for tests.

It finds the results directory from the products record the protocol hands it
(`products=<dir>/work/products/<slug>.products`, kit.sides.side.ContenderSide.spec) and then,
as $HOSTILE says:
- "edit": prepends a line to nanoGPT's train.py in both trees (work/nanogpt/{shipped,patched}),
  then trains as the fake contender does (contender.py);
- "copy": prints, as its own, the losses of PyTorch's run that a check ran before it (its
  stamped log, runs/*pytorch*/attempt-*/stdout.log: `<ns> iter N: loss X, time Y ms`, the
  fake nanoGPT's lines, tests/fakes/nanogpt/train.py), in the contract's grammar; where it
  cannot read them, it says why and exits 1;
- "daemon" or "daemon-null": leaves a double-forked `setsid` daemon (`sleep $HOSTILE_SLEEP`)
  that keeps the run's stdout open, or sends its output to /dev/null, then trains.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import contender  # noqa: E402


def results_dir(argv: list[str]) -> Path:
    (products,) = [a.split("=", 1)[1] for a in argv if a.startswith("products=")]
    return Path(products).parents[2]


def edit(root: Path) -> None:
    for tree in ("shipped", "patched"):
        path = root / "work" / "nanogpt" / tree / "train.py"
        try:
            path.write_text("import time; time.sleep(0)\n" + path.read_text())
            print(f"edited {path}", file=sys.stderr)
        except OSError as e:
            print(f"cannot edit {path}: {e.strerror}", file=sys.stderr)


def copy(root: Path) -> int:
    # where the results directory is, and, in a container, everything mounted
    logs = sorted(glob.glob(f"{root}/runs/*pytorch*/attempt-*/stdout.log"))
    logs += sorted(glob.glob("/micakit/**/runs/*pytorch*/attempt-*/stdout.log", recursive=True))
    try:
        if not logs:
            raise FileNotFoundError(f"no PyTorch log under {root}/runs")
        lines = Path(logs[-1]).read_text().splitlines()
    except OSError as e:
        print(f"cannot copy PyTorch's losses: {e}", file=sys.stderr)
        return 1
    for line in lines:
        text = line.split(" ", 1)[1]
        if text.startswith("iter "):
            step = int(text.split()[1].rstrip(":"))
            loss = text.split("loss ")[1].split(",")[0]
            print(f"step {step} loss {loss} time_ms 1.000", flush=True)
    return 0


def daemon(keep: bool) -> None:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            if not keep:
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 1)
                os.dup2(null, 2)
            os.execvp("sleep", ["sleep", os.environ["HOSTILE_SLEEP"]])
        os._exit(0)
    os.wait()


def main(argv: list[str]) -> int:
    mode = os.environ.get("HOSTILE", "")
    if argv[:3] == ["+mica", "info", "-mica"] or not any(a.startswith("products=") for a in argv):
        return contender.main(argv)
    root = results_dir(argv)
    if mode == "copy" and "--init" in argv:
        return copy(root)
    if mode == "edit":
        edit(root)
    if mode.startswith("daemon"):
        daemon(keep=mode == "daemon")
    return contender.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
