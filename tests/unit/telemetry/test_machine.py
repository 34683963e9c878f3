"""§5 Conditions on a CPU: the machine read from a fake /proc, the check before a run, the samples
during it, and the mark a busy machine leaves in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kit.engine import conditions
from kit.protocol.load import Conditions
from kit.report import markdown, sidetables
from kit.results import rawfiles
from kit.telemetry import machine
from kit.telemetry.procfs import ProcFiles, parse_stat
from tests.unit.telemetry.test_telemetry import FakeTime

KIT = 500  # the kit's pid in the fake /proc
CONTAINER = "c0ffee" * 10 + "abcd"


class FakeProc:
    """A folder laid out as /proc and /sys: CPUs' ticks and processes, moved on by `tick`."""

    def __init__(self, root: Path, cpus: int = 2) -> None:
        self.root, self.cpus = root, cpus
        self.busy = self.idle = 0
        self.procs: dict[int, dict] = {}
        (root / "proc").mkdir(parents=True)
        self.load("0.50")
        self.write()

    def load(self, value: str) -> None:
        (self.root / "proc/loadavg").write_text(f"{value} 0.40 0.30 1/111 999\n")

    def spawn(self, pid: int, ppid: int, name: str, cgroup: str = "0::/user.slice\n") -> None:
        self.procs[pid] = {"ppid": ppid, "name": name, "ticks": 0, "reaped": 0, "cgroup": cgroup}

    def tick(self, elapsed: int, **used: int) -> None:
        """`elapsed` ticks of every CPU go by; process `pN` uses `used["pN"]` of them."""
        for key, ticks in used.items():
            self.procs[int(key[1:])]["ticks"] += ticks
        spent = sum(used.values())
        self.busy += spent
        self.idle += elapsed * self.cpus - spent
        self.write()

    def reap(self, pid: int) -> None:
        """`pid` ends and its parent waits for it: its time moves into the parent's."""
        gone = self.procs.pop(pid)
        self.procs[gone["ppid"]]["reaped"] += gone["ticks"] + gone["reaped"]
        self.write()

    def write(self) -> None:
        proc = self.root / "proc"
        cpu_lines = "".join(f"cpu{i} 0 0 0 0 0 0 0 0 0 0\n" for i in range(self.cpus))
        user, system = self.busy - self.busy // 4, self.busy // 4
        (proc / "stat").write_text(
            f"cpu  {user} 0 {system} {self.idle} 0 0 0 0 0 0\n{cpu_lines}intr 0\n"
        )
        for entry in proc.iterdir():
            if entry.name.isdigit() and int(entry.name) not in self.procs:
                for f in entry.iterdir():
                    f.unlink()
                entry.rmdir()
        for pid, p in self.procs.items():
            folder = proc / str(pid)
            folder.mkdir(exist_ok=True)
            utime, stime = p["ticks"] - p["ticks"] // 3, p["ticks"] // 3
            rest = " ".join(["0"] * 9)
            (folder / "stat").write_text(
                f"{pid} ({p['name']}) S {p['ppid']} 0 0 0 0 0 0 0 0 0 {utime} {stime} "
                f"{p['reaped']} 0 20 0 1 0 {pid * 7} {rest}\n"
            )
            (folder / "cgroup").write_text(p["cgroup"])


@pytest.fixture
def fake(tmp_path: Path) -> FakeProc:
    f = FakeProc(tmp_path / "root")
    f.spawn(1, 0, "init")
    f.spawn(KIT, 1, "python")
    f.spawn(4242, 1, "stress (a) b")  # someone else's, a name with spaces and parentheses
    return f


def test_the_machine_is_read_from_proc_and_sys(fake: FakeProc) -> None:
    files = ProcFiles(fake.root)
    fake.tick(100, p4242=80)
    busy, total, cpus = files.cpu_ticks()
    assert (busy, total, cpus) == (80, 200, 2)
    assert files.load_1m() == 0.5
    assert files.cpu_mhz() is None  # neither cpufreq nor cpuinfo: "not readable"
    (fake.root / "proc/cpuinfo").write_text("cpu MHz\t\t: 2000.0\ncpu MHz\t\t: 3000.0\n")
    assert files.cpu_mhz() == 2500.0
    freq = fake.root / "sys/devices/system/cpu/cpu0/cpufreq"
    freq.mkdir(parents=True)
    (freq / "scaling_cur_freq").write_text("3600000\n")  # kHz: cpufreq first
    assert files.cpu_mhz() == 3600.0
    other = files.processes()[4242]
    assert (other.name, other.ppid, other.ticks) == ("stress (a) b", 1, 80)
    assert parse_stat("12 (x) S 1") is None  # cut short: not a process


def test_others_share_leaves_out_the_kit_its_runs_and_the_runs_container(fake: FakeProc):
    fake.spawn(600, KIT, "train.py")  # a local run: the kit's child
    fake.spawn(601, 600, "compile_worker")  # and its compile worker
    fake.spawn(700, 1, "tini", f"0::/system.slice/docker-{CONTAINER}.scope\n")  # a Docker run
    watcher = machine.Watcher(ProcFiles(fake.root), (KIT,), lambda: CONTAINER)

    def steps(seconds: float) -> None:
        fake.tick(100, p600=60, p601=30, p700=50, p4242=40)

    look = watcher.look(1.0, steps)
    assert look.others_cpu_share == pytest.approx(40 / 200)
    assert look.busiest == ("stress (a) b (pid 4242): 40% of a CPU",)
    # a worker that ends moves its time into the run's: still the kit's, not others'
    watcher.read()
    fake.tick(100, p601=50, p4242=10)
    fake.reap(601)
    _, own = watcher.read()
    assert own == 50
    assert watcher.own == {KIT, 600, 700}


class ScriptedWatcher:
    """Looks that find others' shares in turn, the last repeated; counts the looks."""

    def __init__(self, *shares: float) -> None:
        self.shares, self.looks = list(shares), 0

    def look(self, seconds, sleep) -> machine.Look:
        share = self.shares[min(self.looks, len(self.shares) - 1)]
        self.looks += 1
        sleep(seconds)
        return machine.Look(share, ("stress (pid 4242): 97% of a CPU",), 3.2, None, 2)


def test_the_check_waits_for_a_busy_machine_then_lets_the_run_go_on_marked() -> None:
    t = FakeTime()
    found = machine.wait_until_quiet(
        ScriptedWatcher(0.9, 0.8, 0.1), 0.25, 0.5, timeout_s=60, clock=t, sleep=t.sleep
    )
    assert (found.busy, found.polls, found.waited_s) == (False, 3, 3.5)  # 3 looks, 2 pauses
    t = FakeTime()
    watcher = ScriptedWatcher(0.9)
    found = machine.wait_until_quiet(watcher, 0.25, 0.5, timeout_s=10, clock=t, sleep=t.sleep)
    assert found.busy and found.waited_s == pytest.approx(10.5) and watcher.looks == 8
    record = found.to_dict()
    assert record["busy_share"] == 0.25 and record["load_1m"] == 3.2
    assert record["cpu_mhz"] is None and record["device"] == "cpu"


def test_a_wait_for_a_busy_machine_is_said_once_as_it_begins() -> None:
    t = FakeTime()
    said: list[str] = []
    around = conditions.MachineConditions(Conditions(), idle_timeout_s=60, said=said.append)
    found = machine.wait_until_quiet(
        ScriptedWatcher(0.99), 0.25, 0.5, timeout_s=60, clock=t, sleep=t.sleep,
        waiting=around._waiting,
    )  # fmt: skip
    assert found.busy and found.polls > 2
    assert said == ["waiting up to 60 s: others use 99% of the CPUs"]
    quiet: list[str] = []
    machine.wait_until_quiet(
        ScriptedWatcher(0.1), 0.25, clock=FakeTime(), sleep=t.sleep,
        waiting=lambda *a: quiet.append("said"),
    )  # fmt: skip
    assert quiet == []  # a quiet machine: no wait, nothing said


class SlowWatcher(ScriptedWatcher):
    """A look that takes `taken` seconds however long it was asked to (a loaded machine)."""

    def __init__(self, taken: float, *shares: float) -> None:
        super().__init__(*shares)
        self.taken = taken

    def look(self, seconds, sleep) -> machine.Look:
        return super().look(self.taken, sleep)


def test_a_first_look_that_takes_the_whole_limit_still_says_the_machine_is_busy() -> None:
    """On a loaded machine the first look can outlast a short --idle-timeout: the run goes on
    at once, marked busy, and the line says why (as a wait that went on would)."""
    t = FakeTime()
    said: list[str] = []
    around = conditions.MachineConditions(Conditions(), idle_timeout_s=1, said=said.append)
    found = machine.wait_until_quiet(
        SlowWatcher(1.2, 0.6), 0.25, 0.5, timeout_s=1, clock=t, sleep=t.sleep,
        waiting=around._waiting,
    )  # fmt: skip
    assert found.busy and found.polls == 1
    assert said == ["waiting up to 1 s: others use 60% of the CPUs"]
    # no wait at all (--idle-timeout 0, or a machine found busy at the run before): not said
    none: list[str] = []
    found = machine.wait_until_quiet(
        ScriptedWatcher(0.6), 0.25, 0.5, timeout_s=0, clock=FakeTime(), sleep=t.sleep,
        waiting=lambda *a: none.append("said"),
    )  # fmt: skip
    assert found.busy and none == []


def test_refuse_busy_refuses_at_once_naming_the_busiest() -> None:
    t = FakeTime()
    watcher = ScriptedWatcher(0.9)
    with pytest.raises(machine.MachineBusy) as raised:
        machine.wait_until_quiet(watcher, 0.25, refuse_at_once=True, clock=t, sleep=t.sleep)
    assert watcher.looks == 1
    assert "90% of the CPUs" in raised.value.message and "stress (pid 4242)" in raised.value.message
    assert "--refuse-busy" in str(raised.value.fix)


def test_a_machine_that_stays_busy_is_waited_for_once(fake: FakeProc, tmp_path, monkeypatch):
    fake.tick(100)
    waits: list[float] = []
    real = machine.wait_until_quiet

    def recorded(*args, timeout_s, **kwargs):
        waits.append(timeout_s)
        return real(*args, timeout_s=0.0, **kwargs)  # the fake /proc does not move by itself

    monkeypatch.setattr(machine, "wait_until_quiet", recorded)
    around = conditions.MachineConditions(
        Conditions(cpu_busy_share=0.25, cpu_look_s=0.01),
        idle_timeout_s=30,
        files=ProcFiles(fake.root),
    )
    for run in range(3):
        folder = tmp_path / f"run{run}"
        folder.mkdir()
        around.still_busy = run == 1  # the first check waited in vain; the second found quiet
        with around.around(folder):
            pass
        assert json.loads((folder / rawfiles.IDLE).read_text())["device"] == "cpu"
        header = (folder / rawfiles.MACHINE).read_text().splitlines()[0]
        assert json.loads(header)["format"] == machine.SCHEMA
    assert waits == [30, 0.0, 30]


def _samples(path: Path, rows: list[tuple[int, int, int, int]]) -> Path:
    lines = [{"kind": "header", "schema": machine.SCHEMA, "version": 1}]
    for t_ns, busy, total, own in rows:
        lines.append({"kind": "sample", "t_ns": t_ns, "busy_ticks": busy, "total_ticks": total,
                      "own_ticks": own, "cpus": 2, "load_1m": t_ns / 100, "cpu_mhz": 2000 + t_ns})  # fmt: skip
    lines.append({"kind": "end", "t_ns": rows[-1][0], "samples": len(rows)})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_runs_share_is_its_timed_windows_or_the_samples_around_a_short_one(tmp_path):
    # 0-1 s: the run compiles alone; 1-3 s: its timed steps, others take half; 3-4 s: alone again
    path = _samples(
        tmp_path / "machine.jsonl",
        [(0, 0, 0, 0), (10, 180, 200, 180), (20, 380, 400, 280), (30, 580, 600, 380),
         (40, 760, 800, 560)],
    )  # fmt: skip
    s = machine.summarize_machine(path, 10, 30)
    assert s.others_cpu_share == pytest.approx(200 / 400)
    assert (s.sample_count, s.load_1m_max, s.cpu_mhz_median) == (3, 0.3, 2020.0)
    inside = machine.summarize_machine(path, 5, 35)  # the samples inside, 10 to 30
    assert inside.others_cpu_share == pytest.approx(200 / 400) and inside.sample_count == 3
    short = machine.summarize_machine(path, 12, 18)  # a window shorter than a sample apart
    assert short.sample_count == 2 and short.others_cpu_share == pytest.approx(100 / 200)
    one = machine.summarize_machine(path, 15, 25)  # one sample inside: the two around it too
    assert one.sample_count == 3 and one.others_cpu_share == pytest.approx(200 / 400)


def _cpu_runs(*rows) -> pd.DataFrame:
    cols = ["run_id", "config", "kind", "step_s", "sample_count", "busy_before", "waited_s",
            "load_1m_before", "others_cpu_share_before", "busy_share", "others_cpu_share",
            "cpu_mhz_median"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def test_a_run_on_a_busy_machine_is_marked_beside_its_step_time(monkeypatch) -> None:
    runs = _cpu_runs(
        (1, "m/f32/pytorch/eager", "timed", 0.008, 0, False, 0.4, 0.3, 0.02, 0.25, 0.03, 2600.0),
        (2, "m/f32/pytorch/eager", "timed", 0.110, 0, True, 60.2, 3.9, 0.97, 0.25, 0.91, None),
        (3, "m/f32/pytorch/eager", "timed", 0.030, 0, False, 0.5, 1.1, 0.05, 0.25, 0.60, 2600.0),
        (4, "m/f32/pytorch/eager", "discarded", 0.4, 0, True, 60.0, 3.0, 0.9, 0.25, 0.9, None),
    )
    flags = sidetables.flags(runs).set_index("run_id")
    assert flags["flagged"].to_dict() == {1: False, 2: True, 3: True}  # timed runs only
    assert flags.loc[2, "flag_reasons"] == (
        "measured on a busy machine: others used 97% of the CPUs before it (after a wait of "
        "60 s) and 91% during its timed steps (above 25%)"
    )
    assert flags.loc[3, "flag_reasons"] == (
        "measured on a busy machine: others used 60% of the CPUs during its timed steps (above 25%)"
    )

    class T:
        runs_ = runs.merge(flags.reset_index(), on="run_id", how="left").fillna(
            {"flag_reasons": ""}
        )
        configurations = pd.DataFrame(
            {"config": ["m/f32/pytorch/eager"], "publication": ["preview"]}
        )
        preview, card_named = True, False

    T.runs = T.runs_  # type: ignore[attr-defined]
    monkeypatch.setattr(markdown, "names", lambda rd, t, ids: [f"named {c}" for c in ids])
    monkeypatch.setattr(markdown, "models_of", lambda t, table, protocol, rd: "model m")
    text = "\n".join(markdown.machine_lines(None, T, None))
    assert "| m/f32/pytorch/eager | named m/f32/pytorch/eager | 2     | 110.000" in text
    assert "| 3.9 " in text and "97% " in text and "91% " in text and "not readable" in text
    assert "**2 of 3 timed runs were measured on a busy machine.**" in text
    assert text.count(sidetables.BUSY) == 4  # two marked rows, and the words above the table


def test_only_the_busy_runs_are_worded_and_their_words_are_busy_reasons() -> None:
    """flags() words only the runs its column tests find busy: the same reasons, run by run,
    as `busy_reason` gives each row (a share at the limit, or unknown, is not above it)."""
    runs = _cpu_runs(
        (1, "c", "timed", 0.01, 0, False, 0.4, 0.3, 0.02, 0.25, 0.25, 2600.0),  # at the limit
        (2, "c", "timed", 0.01, 0, False, 0.4, 0.3, 0.02, 0.25, None, 2600.0),  # unknown
        (3, "c", "timed", 0.01, 0, True, 0.0, 0.3, 0.30, 0.25, None, 2600.0),  # before only
        (4, "c", "timed", 0.01, 0, False, 0.4, 0.3, 0.02, 0.25, 0.2500001, 2600.0),  # just above
        (5, "c", "timed", 0.01, 0, False, 0.4, 0.3, 0.02, None, 0.9, 2600.0),  # no machine
    )
    flags = sidetables.flags(runs).set_index("run_id")
    assert flags["flagged"].to_dict() == {1: False, 2: False, 3: True, 4: True}
    rows = runs.set_index("run_id").loc[[1, 2, 3, 4], sidetables.BUSY_COLUMNS]
    expected = {i: sidetables.busy_reason(r) for i, r in rows.iterrows()}
    assert flags["flag_reasons"].to_dict() == expected
    assert expected[3].startswith(sidetables.BUSY) and expected[1] == expected[2] == ""
