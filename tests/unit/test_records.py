"""A run's record is typed: written line for line as runs.jsonl has always held it, read back
with an older schema upgraded and a newer one refused."""

from __future__ import annotations

import json

import pytest

from kit.engine.records import RECORD_SCHEMA, RunRecord
from kit.errors import UserError
from kit.status import RunStatus

LINE = (
    '{"schema": 1, "run_id": 3, "config": "shakespeare-char/float32/contender/mica", '
    '"round": 1, "kind": "timed", "discarded": false, "batch_size": null, '
    '"log_dir": "runs/0003-shakespeare-char.float32.contender.mica/attempt-1", '
    '"started_utc": "2026-12-01T00:49:36+00:00", "start_ns": 10, "end_ns": 20, '
    '"exit_code": 0, "stopped": null, "status": "ok", "reason": "", "step_s": 0.001, '
    '"own_step_s": 0.00099, "final_loss": 3.5, "executor": "local", '
    '"files": {"runs/0003-shakespeare-char.float32.contender.mica/attempt-1/stdout.log": "ab"}}'
)


def test_a_line_is_read_and_written_again_key_for_key_in_order():
    record = RunRecord.from_json(json.loads(LINE))
    assert record.config == "shakespeare-char/float32/contender/mica"
    assert (record.kind, record.discarded, record.batch_size) == ("timed", False, None)
    assert record.step_s == 0.001 and record.status == RunStatus.OK
    assert json.dumps(record.to_json()) == LINE


def test_what_a_check_adds_keeps_its_place_too():
    line = {
        "schema": 1, "run_id": 0, "kind": "shared-start", "side": "pytorch", "seed": 1337,
        "config": "c", "log_dir": "runs/0000-c/attempt-1", "started_utc": "t", "start_ns": 1,
        "end_ns": 2, "exit_code": 0, "stopped": None, "status": "ok", "reason": "",
        "executor": "local", "files": {}, "outputs": {"ckpt.pt": "00"},
    }  # fmt: skip
    record = RunRecord.from_json(line)
    assert record.head == {"kind": "shared-start", "side": "pytorch", "seed": 1337, "config": "c"}
    assert record.outputs == {"ckpt.pt": "00"}
    assert list(record.to_json()) == list(line)


def test_a_record_from_before_schemas_was_a_timed_run():
    old = json.loads(LINE)
    del old["schema"], old["kind"], old["stopped"]
    record = RunRecord.from_json(old)
    assert record.kind == "timed" and record.stopped is None
    assert record.to_json()["schema"] == RECORD_SCHEMA


def test_a_newer_record_is_refused_and_a_broken_one_named():
    with pytest.raises(UserError, match="schema 2; this kit reads schema 1") as e:
        RunRecord.from_json({**json.loads(LINE), "schema": 2}, "runs.jsonl record 4")
    assert "runs.jsonl record 4" in e.value.message
    broken = json.loads(LINE)
    del broken["status"]
    with pytest.raises(UserError, match="not a run record as the kit writes one"):
        RunRecord.from_json(broken)
