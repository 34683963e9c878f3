"""Shared fixtures: a fast test protocol, the fake programs, and a way to run the CLI in-process."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
import tomli_w
from click.testing import CliRunner

from kit.cli.main import main
from kit.measure.timing import BUFFERED
from kit.protocol.load import DEFAULT_PATH
from kit.report import drawer

# Every program a test starts runs under the kit's own interpreter: the fakes' `#!/usr/bin/env
# python3` finds this one first, never whichever python3 the machine happens to have.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

# Every in-process `publish`, `verify` and series forks the plots' drawer, which first loads
# matplotlib (a third of a second of CPU): loaded here once, each drawer the suite forks inherits
# it, as a drawer forked by a command that had loaded it would. The drawer's code is the same.
drawer.preload()

ROOT = Path(__file__).resolve().parent.parent
FAKES = ROOT / "tests" / "fakes"
CONTENDER = FAKES / "contender.py"
FAKE_NANOGPT = FAKES / "nanogpt"
# Tests that need only some text read this one: the play's first lines (4 KB), shipped. The
# protocols the tests write pin its SHA-256 where the real one pins tiny Shakespeare's (D2).
TEXT_INPUT = ROOT / "tests" / "fixtures" / "text" / "input.txt"
TEXT_INPUT_SHA256 = hashlib.sha256(TEXT_INPUT.read_bytes()).hexdigest()
# Tests that need tiny Shakespeare byte for byte: MICAKIT_INPUT, else ../shared beside the
# checkout; they skip, saying so, where neither is.
REAL_INPUT = Path(
    os.environ.get("MICAKIT_INPUT")
    or ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
)
needs_real_input = pytest.mark.skipif(
    not REAL_INPUT.is_file(),
    reason=f"no tiny Shakespeare at {REAL_INPUT}: name a copy with MICAKIT_INPUT",
)


# Fast timing for tests: 100 steps, the window 20..100, a tolerance that load cannot break.
def fast_timing(runs: int, tolerance: float) -> dict[str, object]:
    return {
        "steps": 100,
        "window": [20, 100],
        "runs": runs,
        "discarded_runs": 1,
        "log_interval": 10,
        "cross_check_tolerance": tolerance,
        "verdict_margin": 0.05,
    }


# A machine that other work cannot hold up: tests share their CPUs (pytest, Docker, other
# suites). tests/cli/test_machine_conditions.py puts the reference threshold back.
QUIET_CONDITIONS = {"cpu_busy_share": 1.0, "cpu_look_s": 0.05}

# A fake's step long enough to time on a busy machine: the window (80 steps) lasts 160 ms, so a
# line the kit's reader stamps late (3 ms at p99 with one spinning neighbour a core,
# docs/benchmarks.md; more on a loaded CI runner) moves the step time by a few percent, inside
# the cross-check's tolerance, and ten steps apart no two lines share a stamp (`buffered`). At
# 0.2 ms a step one late stamp voided a run.
STEADY_STEP_MS = {"*": 2.0}

# A timed run whose step the machine held up: more than this over its configuration's median,
# or under it by as much
STALLED = 1.10


def stalled_runs(out: Path, stall: float = STALLED) -> list[str]:
    """The timed runs of a finished series whose step time lies more than STALLED over their
    configuration's median, or as far under it: a fake paces itself to a deadline, so such a
    run is one a loaded machine starved (a CI runner at a load of 15 held one for 260 ms), or
    one held at its window's first line that then ran its late steps back to back to its
    deadline (a 4.4 ms fake read 3.2 ms on a loaded runner); or one the stamps voided; a test
    that reads a ratio or a class from a few runs, or needs every run ok, measures the series
    again rather than the machine."""
    import pandas as pd

    runs = pd.read_csv(out / "tables" / "runs.csv")
    timed = runs[(runs["kind"] == "timed") & (runs["status"] == "ok")]
    medians = timed.groupby("config")["step_s"].transform("median")
    off = (timed["step_s"] > stall * medians) | (timed["step_s"] * stall < medians)
    # and any run of a fake the outside clock's stamps voided (§5's cross-check): its own clock
    # paces it, so the stamps were the machine's, late (an A/A run on a runner at a load of 7);
    # or voided as buffered: a fake flushes every line, so its lines came in a burst only where
    # the machine held the reader
    crossed = [
        r["log_dir"]
        for r in records(out)
        if r["status"] == "void" and str(r.get("reason", "")).startswith(("own clock ", BUFFERED))
    ]
    return [*timed[off]["log_dir"], *crossed]


def steady_series(make: Callable[[], Path], tries: int = 3, stall: float = STALLED) -> Path:
    """`make()` (a series that returns its folder) again, in a fresh folder, while the machine
    stalled one of its timed runs (`stalled_runs`, `stall` from its configuration's median),
    up to `tries` times; the last as it is."""
    for _ in range(tries - 1):
        out = make()
        if not stalled_runs(out, stall):
            return out
        shutil.rmtree(out)
    return make()


# A value in `changes` that removes its key instead of setting it.
DROP = object()


def set_keys(data: dict, changes: Mapping[str, object]) -> dict:
    """data (a protocol read by tomllib) with each dotted key of changes set, or removed (DROP).

    A key's tables must exist; its last part may be new (an unknown key, for the loader to name).
    """
    for dotted, value in changes.items():
        *tables, key = dotted.split(".")
        table = data
        for name in tables:
            assert name in table, f"the protocol has no table {dotted}"
            table = table[name]
        if value is DROP:
            assert key in table, f"the protocol has no key {dotted}"
            del table[key]
        else:
            table[key] = value
    return data


def edit_protocol(path: Path, changes: Mapping[str, object]) -> Path:
    """The protocol file at path rewritten with changes (set_keys), read and written as TOML."""
    data = set_keys(tomllib.loads(path.read_text()), changes)
    path.write_text(tomli_w.dumps(data))
    return path


# The cross-check's tolerance of the tests' protocols: 25%, where the shipped one holds 1%. A
# fake is held up on a loaded runner (four workers and the Docker builds on two cores) between
# reading its clock and writing its line, and a 160 ms window then moves by tens of ms: at 10%
# an honest run was voided now and then. The tests of the cross-check itself set their own
# tolerance (10%) and a fake whose clock is 25% fast (tests/cli/test_series.py).
TEST_TOLERANCE = 0.25


def write_protocol(
    path: Path,
    runs: int = 5,
    tolerance: float = TEST_TOLERANCE,
    changes: Mapping[str, object] | None = None,
) -> Path:
    """The reference protocol with fast timing (and changes, as set_keys sets them), written to
    path.

    It pins TEXT_INPUT's SHA-256 as the input's, so a series under it reads the shipped text.
    """
    data = tomllib.loads(DEFAULT_PATH.read_text())
    assert "input_sha256" in data["data"], "the protocol pins no input_sha256"
    data["data"]["input_sha256"] = TEXT_INPUT_SHA256
    data["timing"] = fast_timing(runs, tolerance)
    assert "conditions" in data, "the protocol sets no [conditions]"
    data["conditions"].update(QUIET_CONDITIONS)
    set_keys(data, changes or {})
    path.write_text(tomli_w.dumps(data))
    return path


@pytest.fixture
def fast_protocol(tmp_path: Path) -> Path:
    return write_protocol(tmp_path / "protocol.toml")


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Set the fakes' behaviour: fake_env(step_ms={...}, events={...})."""

    def set_fake(**cfg) -> dict:
        cfg.setdefault("state", str(tmp_path / "fake-state"))
        monkeypatch.setenv("MICAKIT_FAKE", json.dumps(cfg))
        monkeypatch.setenv("MICAKIT_FAKES", str(FAKES))
        return cfg

    return set_fake


@pytest.fixture
def cli():
    """Run `micakit ARGS` in-process; returns click's Result."""

    def invoke(*args: str):
        return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)

    return invoke


def series_once(root: Path, args: Sequence[object], **fake: object) -> Path:
    """A whole series made once, for a module-scoped fixture: `micakit ARGS` run in-process
    with the fakes set as `fake_env` sets them and a cache of its own under `root` (a module's
    fixture is made before any test's `_isolated_cache`); it must end with exit 0. A test that
    alters the series copies it first (`copied`)."""
    fake.setdefault("state", str(root / "fake-state"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MICAKIT_FAKE", json.dumps(fake))
        mp.setenv("MICAKIT_FAKES", str(FAKES))
        mp.setenv("MICAKIT_CACHE", str(root / "cache"))
        made = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert made.exit_code == 0, made.output
    return Path(str(args[args.index("--out") + 1])) if "--out" in args else root


def preview_series(root: Path, protocol: Path, *extra: str) -> tuple[Path, str]:
    """A small contender-only series of the fakes (2 ms steps) in root/r, made once for a
    module and published as a preview (rule 6 withholds unchecked times; the preview publishes
    the numbers the tests read and edit); with what the series printed."""
    out = root / "r"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MICAKIT_FAKE", json.dumps({"step_ms": {"*": 2.0}, "state": str(root / "st")}))
        mp.setenv("MICAKIT_CACHE", str(root / "cache"))
        args = contender_args(out, protocol, *extra)
        made = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert made.exit_code == 0, made.output
    published = CliRunner().invoke(main, ["publish", str(out), "--preview"])
    assert published.exit_code == 0, published.output
    return out, made.output


def alive(marker: str) -> list[int]:
    """The pids of the processes whose command line holds `marker`, zombies left out."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def run_py(*args: object, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python run.py ARGS`, the documented invocation, in a process of its own with the kit's
    interpreter: its exit code, stdout and stderr kept whole."""
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *map(str, args)],
        env=None if env is None else dict(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_benchmark(name: str, *args: object, timeout: int = 600) -> subprocess.CompletedProcess:
    """`python benchmarks/kit/NAME ARGS`, as docs/benchmarks.md gives it, with the kit's
    interpreter from the checkout's root: its exit code, stdout and stderr kept whole."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kit" / name), *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def copied(series: Path, tmp_path: Path) -> Path:
    """A test's own copy of a module's series, to alter."""
    out = tmp_path / series.name
    shutil.copytree(series, out, symlinks=True)
    return out


def contender_args(out: Path, protocol: Path, *extra: str, device: str = "cpu") -> list[str]:
    """A contender-only series of the local executor; on a card (`device="cuda"`), the tests'
    NVML is scripted."""
    where = ["--device", "cpu", "--full-cpu"] if device == "cpu" else ["--device", device]
    return [
        "series", "--out", out, "--protocol", protocol, *where, "--no-pytorch",
        "--contender", CONTENDER, "--executor", "local", "--model", "shakespeare-char",
        "--input", TEXT_INPUT, *extra,
    ]  # fmt: skip


def fake_series(root: Path, name: str, args: list, code: int = 0, **fake: object) -> Path:
    """A series of the fakes in root/NAME, made in-process: `args` with "OUT" where its folder
    goes, `fake` the fakes' behaviour (step_ms: 2 ms unless given); it must exit `code`."""
    out = root / name
    fake.setdefault("step_ms", {"*": 2.0})
    fake["state"] = str(root / f"{name}.state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MICAKIT_FAKE", json.dumps(fake))
        mp.setenv("MICAKIT_CACHE", str(root / "cache"))
        mp.setenv("MICAKIT_FAKES", str(FAKES))
        argv = [str(out if a == "OUT" else a) for a in args]
        res = CliRunner().invoke(main, argv, catch_exceptions=False)
    assert res.exit_code == code, res.output
    return out


def raw_records(out: Path) -> list[dict]:
    """runs.jsonl's lines as the kit wrote them (kit.results.records)."""
    path = out / "runs.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def records(out: Path) -> list[dict]:
    """runs.jsonl's records, each one flat mapping: the planned run's fields ("run") and the
    judgement's ("judged") beside the engine's, as the tests read them."""
    return [flat(r) for r in raw_records(out)]


def flat(record: dict) -> dict:
    nested = ("run", "judged")
    envelope = {k: v for k, v in record.items() if k not in nested}
    return {**envelope, **record.get("run", {}), **record.get("judged", {})}


def python() -> str:
    return sys.executable


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    # never touch the user's cache from a test
    monkeypatch.setenv("MICAKIT_CACHE", str(tmp_path_factory.mktemp("cache")))
    os.environ.pop("MICAKIT_FAKE", None)


@pytest.fixture
def sigint_default():
    """Python's own SIGINT handler for the test and the programs it starts.

    A background job of a non-interactive shell starts with SIGINT ignored, and a child inherits
    that: the series a test then sends SIGINT (Ctrl-C) to would never hear it and the test would
    wait forever. With the handler restored, the child starts with SIGINT at its default.
    """
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


class SmallDisk:
    """A tmpfs of a few MiB (`small_disk`), which a test fills to its last byte and frees."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.filler = root / ".filler"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while True:
                os.write(fd, b"\0" * (1 << 16))
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A real full disk to write on: an 8 MiB tmpfs mounted (mount(2), through ctypes), unmounted
    after; skipped, saying why, where this process may not mount one. It is mounted outside
    /tmp (in /var/tmp, where there is one): a mount under /tmp keeps a confined run of another
    test from making /tmp its own (the kernel refuses an overlay over locked mounts)."""
    beside = Path("/var/tmp") if Path("/var/tmp").is_dir() else tmp_path
    root = Path(tempfile.mkdtemp(prefix="micakit-small-disk-", dir=beside))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mounted = libc.mount(b"tmpfs", os.fsencode(root), b"tmpfs", 0, b"size=8m") == 0
        why = os.strerror(ctypes.get_errno())
    except AttributeError:  # no mount(2): not Linux
        mounted, why = False, "no mount(2) on this system"
    if not mounted:
        root.rmdir()
        pytest.skip(f"cannot mount a tmpfs ({why}): a full disk needs root or CAP_SYS_ADMIN")
    try:
        yield SmallDisk(root)
    finally:
        libc.umount2(os.fsencode(root), 2)  # MNT_DETACH: a process still in it lets go later
        shutil.rmtree(root, ignore_errors=True)


def fake_nanogpt_protocol(path: Path, runs: int = 5, tolerance: float = TEST_TOLERANCE) -> Path:
    """A protocol whose pinned nanoGPT is the fake under tests/fakes/nanogpt, hashes and patch.

    The kit checks and patches the fake exactly as it checks and patches the real nanoGPT.
    """
    write_protocol(path, runs=runs, tolerance=tolerance)
    return edit_protocol(
        path, {**pin_fake_nanogpt(), "nanogpt.patch": str(FAKE_NANOGPT / "train.patch")}
    )


def pin_fake_nanogpt(tree: Path = FAKE_NANOGPT) -> dict[str, object]:
    """The changes (set_keys) that pin the fake nanoGPT's files, as found in tree, in
    [nanogpt.files]."""
    files = ["train.py", "model.py", "configurator.py", "config/train_shakespeare_char.py"]
    return {
        "nanogpt.files": {f: hashlib.sha256((tree / f).read_bytes()).hexdigest() for f in files}
    }


def pytorch_args(out: Path, protocol: Path, *extra: str) -> list:
    """A series of both sides: the fake nanoGPT through the real PyTorch side, and the contender."""
    return [
        "series", "--out", out, "--protocol", protocol, "--device", "cpu", "--full-cpu", "--executor", "local",
        "--nanogpt", FAKE_NANOGPT, "--input", TEXT_INPUT, "--model", "shakespeare-char",
        "--precision", "float32", *extra,
    ]  # fmt: skip
