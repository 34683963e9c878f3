"""Run statuses: one enum whose members are the strings runs.jsonl has always held."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pandas as pd

from kit.measure import timing
from kit.status import FINAL, RunStatus

KIT = Path(str(resources.files("kit")))


def test_the_json_values_are_those_written_before() -> None:
    assert [s.value for s in RunStatus] == [
        "ok",
        "out of memory",
        "void",
        "failed",
        "not profiled",
    ]
    assert (timing.OK, timing.OOM, timing.VOID, timing.FAILED) == tuple(RunStatus)[:4]


def test_a_record_written_and_read_back_compares_with_the_members() -> None:
    line = json.dumps({"run_id": 3, "status": RunStatus.OUT_OF_MEMORY})
    assert line == '{"run_id": 3, "status": "out of memory"}'
    record = json.loads(line)
    assert record["status"] == RunStatus.OUT_OF_MEMORY and RunStatus(record["status"]) is (
        RunStatus.OUT_OF_MEMORY
    )
    runs = pd.DataFrame({"status": ["ok", "void", "not profiled"]})
    assert list(runs["status"] == RunStatus.OK) == [True, False, False]
    assert runs["status"].isin([RunStatus.OK, RunStatus.NOT_PROFILED]).sum() == 2
    assert f"{RunStatus.NOT_PROFILED}: nsys not found" == "not profiled: nsys not found"


def test_no_module_compares_a_status_with_a_bare_string() -> None:
    values = "|".join(re.escape(s.value) for s in RunStatus)
    bare = re.compile(rf"""status["']\]\s*(?:[!=]=|in)\s*[\[(]?\s*["']({values})["']""")
    listed = re.compile(rf"""status["']\]\.isin\(\[[^\]]*["']({values})["']""")
    found = [
        f"{path.relative_to(KIT)}:{number}: {line.strip()}"
        for path in sorted(KIT.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if bare.search(line) or listed.search(line)
    ]
    assert found == []


def test_the_final_statuses_are_one_set_defined_once() -> None:
    # a failed run runs again at the resume (amendment 8.4); every other record is its run's last
    assert FINAL == set(RunStatus) - {RunStatus.FAILED}
    # no module keeps a list of its own (a series' DONE and the store's FINAL once disagreed
    # about where they lived): a module-level name bound to two or more statuses
    listed = re.compile(r"^[A-Z_]+\s*=\s*.*\b(?:RunStatus|timing)\.[A-Z_]+\s*,")
    found = [
        f"{path.relative_to(KIT)}:{number}: {line.strip()}"
        for path in sorted(KIT.rglob("*.py"))
        if path != KIT / "status.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if listed.search(line)
    ]
    assert found == []
