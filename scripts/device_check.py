"""The device check: one prepared pass over everything the kit does on a real NVIDIA card.

Run through scripts/device-check.sh (see there for the options). It needs a Python with torch and
the kit's own dependencies; no Docker engine, no internet, no nsys and a torch other than the
protocol's pin are all allowed (the series then reads "preparation", rule 9). Every raw capture
goes into one folder ($OUT when set), small enough to keep as test fixtures, beside summary.md.

Each step prints one line, `step NAME: ok | skipped: why | failed: why`; the script exits 1 when
any step failed, 0 otherwise (skips are not failures: they say what this machine could not do).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kit.engine.series import files_beside  # noqa: E402
from kit.errors import UserError  # noqa: E402
from kit.measure import timing  # noqa: E402
from kit.protocol.load import DEFAULT_PATH, load  # noqa: E402

# the library opens worth a fixture (amendment 2): the driver, cuBLAS, NVRTC
WANTED_LIBS = ("libcuda", "libcublas", "libnvrtc")


class Check:
    """The steps' outcomes, printed as they come and kept for the summary."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.steps: list[tuple[str, str, str]] = []

    def say(self, name: str, outcome: str, detail: str = "") -> None:
        self.steps.append((name, outcome, detail))
        line = f"step {name}: {outcome}" + (f": {detail}" if detail else "")
        print(line, flush=True)

    @property
    def failed(self) -> bool:
        return any(outcome == "failed" for _, outcome, _ in self.steps)


def kit(args: list[str], out: Path, name: str, env: dict[str, str] | None = None) -> int:
    """`micakit ARGS` under this interpreter, its output kept as NAME.log in the output folder."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), full_env.get("PYTHONPATH")) if p
    )
    with open(out / f"{name}.log", "wb") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "kit.cli.main", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            check=False,
        )
    return proc.returncode


# the kit's own words for what the user must fix: `micakit: error: ...`, then `  fix: ...`
_ERROR = re.compile(r"^(?:[\w.-]+: )?error: ")
_TRACEBACK = "Traceback (most recent call last):"


def reason(log: Path) -> str:
    """Why a step's program failed, in one line; its whole output stays in the log.

    The kit's `error:` line and the `fix:` after it; else a traceback's last line, the exception
    (a traceback is a bug, and its frames are in the log); else the output's last line.
    """
    text = log.read_text(errors="replace") if log.exists() else ""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    where = f" (all of it in {log.name})"
    errors = [i for i, line in enumerate(lines) if _ERROR.match(line.strip())]
    if errors:
        # the message may go on over indented lines (what differs, file by file) to its fix
        message, fix = [lines[errors[-1]].strip()], ""
        for line in lines[errors[-1] + 1 :]:
            if not line[:1].isspace() or line.strip().startswith("fix:"):
                fix = line.strip() if line.strip().startswith("fix:") else ""
                break
            message.append(line.strip())
        if len(message) > 6:
            message[6:] = [f"and {len(message) - 6} more lines"]
        return " ".join(message) + (f"; {fix}" if fix else "") + where
    starts = [i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    if starts:
        # the exception is the traceback's last unindented line (notes and carets are indented)
        last = [x for x in lines[starts[-1] + 1 :] if not x[:1].isspace()]
        if last:
            return last[-1] + where
    return (lines[-1].strip() if lines else "no output") + where


def card_step(check: Check, device: str) -> dict:
    """The card through NVML: name, compute capability, driver, memory, clocks."""
    if device == "cpu":
        check.say("card", "skipped", "--device cpu: no card is read")
        return {}
    try:
        import pynvml
    except ImportError:
        check.say("card", "failed", "pynvml is not importable (pip install nvidia-ml-py)")
        return {}
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        card = {
            "name": pynvml.nvmlDeviceGetName(h),
            "compute_capability": list(pynvml.nvmlDeviceGetCudaComputeCapability(h)),
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "memory_total_bytes": int(mem.total),
            "memory_used_bytes": int(mem.used),
            "clock_sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "clock_sm_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "clock_mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        }
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as e:
        check.say("card", "failed", f"NVML: {e}")
        return {}
    (check.out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    cc = card["compute_capability"]
    check.say("card", "ok", f"{card['name']}, compute capability {cc[0]}.{cc[1]}")
    return card


def one_round_protocol(src: Path, folder: Path, *, extra_args: list[str] | None = None) -> Path:
    """The protocol with one timed round (its discarded run kept): a check, not a series.

    The copy lies in a folder of its own beside copies of the files the protocol names beside
    itself (nanoGPT's patch, the models' configuration file, the families' rules), the ones a
    series reads and hashes there (`files_beside`), so it reads what the original reads; a file
    the protocol names by an absolute path it names the same way.
    """
    p = load(src)
    folder.mkdir(parents=True, exist_ok=True)
    for name in files_beside(p):
        if not Path(name).is_absolute():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p.beside(name), folder / name)
    dest = folder / src.name
    text = src.read_text()
    for table in ("timing", "smoke"):
        text = re.sub(
            rf"(\n\[{table}\](?:(?!\n\[).)*?\nruns = )\d+", r"\g<1>1", text, count=1, flags=re.S
        )
    if extra_args:
        args = ", ".join(json.dumps(a) for a in extra_args)
        text = re.sub(
            r"(\n\[models\.shakespeare-char\](?:(?!\n\[).)*?\nargs = )\[\]",
            rf"\g<1>[{args}]",
            text,
            count=1,
            flags=re.S,
        )
    dest.write_text(text)
    return dest


def series_step(check: Check, a: argparse.Namespace, card: dict) -> Path | None:
    """M1 (bfloat16 where the card has it, else float32), PyTorch's four modes, the discarded run
    and one round, a short A/A round (`--aa`: PyTorch's default mode and the contender's primary
    build, each beside its twin), §6's separate records (library opens, graph breaks, nsys),
    then verify."""
    out = check.out / "series"
    try:
        protocol = one_round_protocol(a.protocol, check.out / "protocol-one-round")
    except UserError as e:
        check.say("series", "failed", f"{e.message}" + (f"; fix: {e.fix}" if e.fix else ""))
        return None
    args = ["series", "--out", str(out), "--executor", "local", "--protocol", str(protocol)]
    args += ["--nanogpt", str(a.nanogpt), "--input", str(a.input), "--allow-torch", "--aa"]
    if a.device == "cpu":
        args += ["--smoke", "--device", "cpu"]
        precision = "float32"
    else:
        cc = card.get("compute_capability") or [0, 0]
        precision = "bfloat16" if cc[0] >= 8 else "float32"  # D3: bfloat16 from 8.0 on
        args += ["--device", "cuda", "--model", "shakespeare-char", "--precision", precision]
    if a.contender:
        args += ["--contender", str(a.contender)]
    t0 = time.monotonic()
    code = kit(args, check.out, "series")
    took = time.monotonic() - t0
    if code != 0:
        check.say("series", "failed", f"exit {code}: {reason(check.out / 'series.log')}")
        return out if out.exists() else None
    check.say("series", "ok", f"{precision}, {took:.0f} s")
    code = kit(["verify", str(out)], check.out, "verify")
    if code == 0:
        check.say("verify", "ok")
    else:
        check.say("verify", "failed", f"exit {code}: {reason(check.out / 'verify.log')}")
    return out


def aa_step(check: Check, series: Path | None) -> None:
    """The series' A/A round (kit/report/aa.py): each chosen configuration against its twin,
    from tables/aa.csv, which the kit recomputed from the raw logs."""
    import pandas as pd

    table = series / "tables" / "aa.csv" if series else None
    if table is None or not table.is_file():
        check.say("aa", "failed", "the series published no tables/aa.csv")
        return
    rows = pd.read_csv(table).to_dict("records")
    said = [
        f"{r['config']}: twin / configuration {r['ratio']:.4f}"
        + (f" (flagged: {r['flag_reasons']})" if r["flagged"] else "")
        for r in rows
    ]
    check.say("aa", "ok" if rows else "failed", "; ".join(said) or "no A/A configuration")


def nanogpt_step(
    check: Check, a: argparse.Namespace, series: Path | None, name: str, args: list[str]
) -> subprocess.CompletedProcess | None:
    """nanoGPT's own train.py from the series' shipped tree, its output kept as NAME.log."""
    tree = series / "work" / "nanogpt" / "shipped" if series else None
    if tree is None or not (tree / "train.py").is_file():
        check.say(name, "failed", "the series wrote no nanoGPT tree to train from")
        return None
    argv = [sys.executable, "-u", "train.py", "config/train_shakespeare_char.py"]
    argv += [f"--device={a.device}", "--compile=False", "--eval_interval=100000"]
    argv += ["--eval_iters=1", "--log_interval=10", "--always_save_checkpoint=False", *args]
    with open(check.out / f"{name}.log", "wb") as log:
        return subprocess.run(argv, cwd=tree, stdout=log, stderr=subprocess.STDOUT, check=False)


def float16_step(check: Check, a: argparse.Namespace, series: Path | None) -> None:
    """Amendment 4.1: M1 in float16 for 50 steps through nanoGPT's GradScaler path."""
    if a.device == "cpu":
        check.say("float16", "skipped", "--device cpu: GradScaler's float16 path needs a card")
        return
    proc = nanogpt_step(check, a, series, "float16", ["--dtype=float16", "--max_iters=50"])
    if proc is None:
        return
    log = (check.out / "float16.log").read_text(errors="replace")
    steps = re.findall(r"^iter (\d+): loss (\S+),", log, flags=re.M)
    if proc.returncode == 0 and steps and steps[-1][0] == "50":
        check.say("float16", "ok", f"step 50 loss {steps[-1][1]}")
    else:
        detail = f"exit {proc.returncode}: {reason(check.out / 'float16.log')}"
        check.say("float16", "failed", detail)


def oom_step(check: Check, a: argparse.Namespace, card: dict) -> None:
    """Amendment 8: a run far beyond the card's memory is recorded as out of memory."""
    if a.device == "cpu":
        check.say("out-of-memory", "skipped", "--device cpu: a CPU run would exhaust the host")
        return
    out = check.out / "oom-series"
    # M1's tokens are 256 a row; 2^16 rows asks for hundreds of GiB of activations
    try:
        protocol = one_round_protocol(
            a.protocol, check.out / "protocol-oom", extra_args=["--batch_size=65536"]
        )
    except UserError as e:
        check.say("out-of-memory", "failed", e.message + (f"; fix: {e.fix}" if e.fix else ""))
        return
    args = ["series", "--out", str(out), "--executor", "local", "--protocol", str(protocol)]
    args += ["--nanogpt", str(a.nanogpt), "--input", str(a.input), "--allow-torch"]
    args += ["--device", "cuda", "--model", "shakespeare-char", "--precision", "float32"]
    code = kit(args, check.out, "oom-series")
    runs = out / "runs.jsonl"
    records = [json.loads(x) for x in runs.read_text().splitlines()] if runs.exists() else []
    oom = [r for r in records if r.get("status") == timing.OOM]
    if oom:
        check.say("out-of-memory", "ok", f"{len(oom)} run(s) recorded out of memory, exit {code}")
    else:
        statuses = sorted({str(r.get("status")) for r in records}) or ["no record"]
        check.say("out-of-memory", "failed", f"exit {code}, statuses {statuses}")


def captures_step(check: Check, series: Path | None) -> None:
    """§6 and amendment 2: the library opens of the discarded runs, the graph-break logs, nsys."""
    if series is None:
        check.say("captures", "failed", "no series to read")
        return
    opens = sorted(series.glob("runs/*/attempt-*/ld_debug/*"))
    names = set()
    for f in opens:
        names.update(re.findall(r"(lib[\w+-]+\.so[\w.]*)", f.read_text(errors="replace")))
    found = sorted(n for n in names if n.startswith(WANTED_LIBS))
    breaks = sorted(series.glob("runs/*graph*/attempt-*/stderr.log"))
    detail = f"{len(opens)} library-open logs ({', '.join(found) or 'no CUDA library'}); "
    detail += f"{len(breaks)} graph-break logs"
    check.say("captures", "ok" if opens else "failed", detail)
    nsys = shutil.which("nsys")
    if nsys is None:
        check.say("nsys", "skipped", "nsys is not on PATH: no kernel tables on this machine")
    else:
        tables = sorted(series.glob("runs/*profile*/attempt-*/*.csv"))
        check.say("nsys", "ok" if tables else "failed", f"{nsys}: {len(tables)} kernel tables")


def summary(check: Check, series: Path | None, card: dict) -> None:
    """One page: the steps, the card, the step times, peak memory, the sampler, warm-up."""
    import pandas as pd

    lines = ["# Device check", ""]
    lines += [f"- {n}: {o}" + (f" — {d}" if d else "") for n, o, d in check.steps]
    if card:
        lines += ["", "## Card (NVML)", "", "```", json.dumps(card, indent=2), "```"]
    tables = series / "tables" if series else None
    if tables and tables.is_dir():
        for name in sorted(p.stem for p in tables.glob("*.csv")):
            frame = pd.read_csv(tables / f"{name}.csv")
            if frame.empty:
                continue
            lines += ["", f"## {name} (series/tables/{name}.csv)", ""]
            lines += [frame.head(40).to_markdown(index=False)]
    (check.out / "summary.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/device-check.sh", description=__doc__)
    parser.add_argument("--nanogpt", type=Path, required=True, help="a nanoGPT checkout")
    parser.add_argument("--input", type=Path, required=True, help="tiny Shakespeare's input.txt")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "device-check"))
    parser.add_argument("--protocol", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--contender", type=Path, help="a contender program, run beside nanoGPT")
    parser.add_argument(
        "--keep-work", action="store_true", help="keep the series' nanoGPT trees and datasets"
    )
    a = parser.parse_args(argv)
    for what, path in (("--nanogpt", a.nanogpt), ("--input", a.input), ("--protocol", a.protocol)):
        if not path.exists():
            print(f"error: {what} {path} does not exist\nfix: name the path", file=sys.stderr)
            return 2
    a.nanogpt, a.input, a.protocol = a.nanogpt.resolve(), a.input.resolve(), a.protocol.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    check = Check(a.out.resolve())
    import torch

    check.say("torch", "ok", f"{torch.__version__}, CUDA available: {torch.cuda.is_available()}")
    card = card_step(check, a.device)
    series = series_step(check, a, card)
    aa_step(check, series)
    float16_step(check, a, series)
    oom_step(check, a, card)
    captures_step(check, series)
    summary(check, series, card)
    if not a.keep_work:
        # nanoGPT's source and the datasets are not captures: never keep a copy of nanoGPT's code
        for d in (check.out / "series" / "work", check.out / "oom-series" / "work"):
            shutil.rmtree(d, ignore_errors=True)
    print(f"captures and summary: {check.out}", flush=True)
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
