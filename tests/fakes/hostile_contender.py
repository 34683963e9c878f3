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
- "rewrite": appends to the products record in every run after the one that wrote it;
- "daemon" or "daemon-null": leaves a double-forked `setsid` daemon (`sleep $HOSTILE_SLEEP`)
  that keeps the run's stdout open, or sends its output to /dev/null, then trains.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import sys
import time
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


def copy(root: Path, sibling: bool = False) -> int:
    # where the results directory is, and, in a container, everything mounted; `sibling`: an
    # earlier check's directory beside it, which ran PyTorch from the same shared start
    logs = sorted(glob.glob(f"{root}/runs/*pytorch*/attempt-*/stdout.log"))
    if sibling:
        logs = [p for p in sorted(glob.glob(f"{root.parent}/*/runs/*pytorch*/attempt-*/stdout.log"))
                if not p.startswith(f"{root}/")]  # fmt: skip
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


def _append(path: str, line: str, done: str, verb: str) -> None:
    """Appends `line` to `path`, saying on stderr whether it could."""
    try:
        with open(path, "a") as f:
            f.write(line)
        print(f"{done} {path}", file=sys.stderr)
    except OSError as e:
        print(f"cannot {verb} {path}: {e.strerror}", file=sys.stderr)


def reach() -> None:
    """Say, on stderr, what it reaches outside the results directory: each file $HOSTILE_TARGET
    names (os.pathsep between them), appended a line where it may, a file left in /tmp
    ($HOSTILE_SLEEP names it), and how many processes it sees."""
    for target in filter(None, os.environ.get("HOSTILE_TARGET", "").split(os.pathsep)):
        _append(target, "written by the contender\n", "reach: may write", "write")
    left = f"/tmp/hostile-{os.environ['HOSTILE_SLEEP']}"
    try:
        Path(left).write_text("left by the contender\n")
    except OSError as e:
        print(f"reach: cannot leave {left}: {e.strerror}", file=sys.stderr)
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    print(f"reach: sees {len(pids)} processes", file=sys.stderr)


def forge(dead: bool) -> None:
    """Leaves a daemon that, once the program has exited, writes the report its supervisor
    owes the kit (kit/executors/supervisor.py: main writes JSON on the request's report_fd,
    found in the supervisor's command line) claiming namespaces and no process left, then
    SIGKILLs the supervisor so its true report never comes, and lives on (`sleep`). `dead`:
    the report says the program was killed by SIGKILL, as its supervisor then was."""
    program, supervisor = os.getpid(), os.getppid()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 1)
            os.dup2(null, 2)
            cmdline = Path(f"/proc/{supervisor}/cmdline").read_bytes().split(b"\0")
            request = next(a for a in cmdline if a.startswith(b"{"))  # its one JSON argument
            fd = json.loads(request)["report_fd"]
            while os.path.exists(f"/proc/{program}/cmdline") and not _zombie(program):
                time.sleep(0.01)
            fake = {"isolation": "namespaces", "exit_code": -9 if dead else 0, "outlived": [],
                    "outlived_count": 0, "killed": 0}  # fmt: skip
            try:
                with open(f"/proc/{supervisor}/fd/{fd}", "w") as f:
                    f.write(json.dumps(fake))
                os.kill(supervisor, signal.SIGKILL)
            except OSError:
                os._exit(1)
            os.execvp("sleep", ["sleep", os.environ["HOSTILE_SLEEP"]])
        os._exit(0)
    os.wait()


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def rewrite(argv: list[str]) -> int:
    """Trains, then appends a line to the products record a run before it wrote (amendment
    4.3: the discarded run writes it, timed runs read it), saying on stderr whether it could."""
    (products,) = [a.split("=", 1)[1] for a in argv if a.startswith("products=")]
    existed = os.path.exists(products)
    code = contender.main(argv)
    if existed:
        _append(products, "rewritten by a timed run\n", "rewrote", "rewrite")
    return code


def main(argv: list[str]) -> int:
    mode = os.environ.get("HOSTILE", "")
    if argv[:3] == ["+mica", "info", "-mica"] or not any(a.startswith("products=") for a in argv):
        return contender.main(argv)
    root = results_dir(argv)
    if mode.startswith("copy") and "--init" in argv:
        return copy(root, sibling=mode == "copy-sibling")
    if mode == "rewrite":
        return rewrite(argv)
    if mode == "edit":
        edit(root)
    if mode == "reach":
        reach()
    if mode.startswith("forge"):
        forge(dead=mode == "forge-dead")
    if mode.startswith("daemon"):
        daemon(keep=mode == "daemon")
    return contender.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
