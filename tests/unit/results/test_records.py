"""A run's record is typed: written with the run's and the judgement's fields each under its
own name, read back by name whatever the order of its keys, with an older schema upgraded and a
newer one refused."""

from __future__ import annotations

import json

import pytest

from kit.errors import UserError
from kit.results.records import RECORD_SCHEMA, RunRecord
from kit.status import RunStatus

LINE = (
    '{"schema_version": 4, "run_id": 3, "run": {"config": "shakespeare-char/float32/contender/mica", '
    '"round": 1, "kind": "timed", "discarded": false, "batch_size": null}, '
    '"log_dir": "runs/0003-shakespeare-char.float32.contender.mica/attempt-1", '
    '"started_utc": "2026-12-01T00:49:36+00:00", "start_ns": 10, "end_ns": 20, '
    '"exit_code": 0, "stopped": null, "status": "ok", "reason": "", "judged": {"step_s": 0.001, '
    '"own_step_s": 0.00099, "final_loss": 3.5}, "executor": "local", '
    '"files": {"runs/0003-shakespeare-char.float32.contender.mica/attempt-1/stdout.log": "ab"}}'
)
# the same run as a schema-3 kit wrote it: no conditions (the report reads the raw files)
LINE_V3 = LINE.replace('{"schema_version": 4,', '{"schema_version": 3,')
# the same run as a schema-2 kit wrote it: the version under "schema"
LINE_V2 = LINE.replace('{"schema_version": 4,', '{"schema": 2,')
# a CPU run's conditions, as the engine records them (kit.results.run_conditions)
CONDITIONS = {"machine": {"busy_before": False, "others_cpu_share": 0.01, "load_1m_max": 0.5}}
# the same run as a schema-1 kit wrote it: every field flat, the judgement's after the reason
LINE_V1 = (
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


@pytest.mark.parametrize(
    "line", [LINE, LINE_V3, LINE_V2, LINE_V1], ids=["schema 4", "schema 3", "schema 2", "schema 1"]
)
def test_a_record_with_its_keys_sorted_reads_back_the_same(line):
    # `jq -S` sorts every object's keys: a record is read by its keys' names, never their order
    as_written = RunRecord.from_json(json.loads(line))
    resorted = RunRecord.from_json(json.loads(json.dumps(json.loads(line), sort_keys=True)))
    assert resorted == as_written
    assert resorted.judged == {"step_s": 0.001, "own_step_s": 0.00099, "final_loss": 3.5}
    assert resorted.head["round"] == 1 and resorted.step_s == 0.001


@pytest.mark.parametrize(
    "older", [LINE_V3, LINE_V2, LINE_V1], ids=["schema 3", "schema 2", "schema 1"]
)
def test_an_older_record_is_upgraded(older):
    record = RunRecord.from_json(json.loads(older))
    assert record == RunRecord.from_json(json.loads(LINE))
    assert json.dumps(record.to_json()) == LINE
    assert record.conditions is None  # not kept: the report reads the run's raw files


def test_a_runs_conditions_are_kept_after_its_files_and_read_back():
    line = {**json.loads(LINE), "conditions": CONDITIONS}
    record = RunRecord.from_json(line)
    assert record.conditions == CONDITIONS
    assert record.to_json() == line and list(record.to_json())[-1] == "conditions"
    # a run that never ran has none to keep, which is not the same as an older kit's record
    assert RunRecord.from_json({**line, "conditions": {}}).conditions == {}
    with pytest.raises(UserError, match="not a run record as the kit writes one"):
        RunRecord.from_json({**line, "conditions": [1]})


def test_what_a_check_adds_keeps_its_place_too():
    line = {
        "schema_version": 3, "run_id": 0, "run": {"kind": "shared-start", "side": "pytorch",
        "seed": 1337, "config": "c"}, "log_dir": "runs/0000-c/attempt-1", "started_utc": "t",
        "start_ns": 1, "end_ns": 2, "exit_code": 0, "stopped": None, "status": "ok",
        "reason": "", "judged": {}, "executor": "local", "files": {}, "outputs": {"ckpt.pt": "00"},
    }  # fmt: skip
    record = RunRecord.from_json(line)
    assert record.head == {"kind": "shared-start", "side": "pytorch", "seed": 1337, "config": "c"}
    assert record.outputs == {"ckpt.pt": "00"}
    assert list(record.to_json()) == list(line)
    # a schema-1 check's record: its side and seed were the run's, in any order
    flat = {k: v for k, v in line.items() if k not in ("run", "judged", "schema_version")}
    v1 = {**dict(sorted({**flat, **line["run"]}.items())), "schema": 1}
    assert RunRecord.from_json(v1).head == record.head


def test_a_record_from_before_schemas_was_a_timed_run():
    old = json.loads(LINE_V1)
    del old["schema"], old["kind"], old["stopped"]
    record = RunRecord.from_json(old)
    assert record.kind == "timed" and record.stopped is None
    assert record.step_s == 0.001 and record.head["round"] == 1
    assert record.to_json()["schema_version"] == RECORD_SCHEMA


def test_a_newer_record_is_refused_and_a_broken_one_named():
    with pytest.raises(UserError, match="schema 5; this kit reads schema 4") as e:
        RunRecord.from_json({**json.loads(LINE), "schema_version": 5}, "runs.jsonl record 4")
    assert "runs.jsonl record 4" in e.value.message
    broken = json.loads(LINE)
    del broken["status"]
    with pytest.raises(UserError, match="not a run record as the kit writes one"):
        RunRecord.from_json(broken)
    # a schema-2 record holds no field but its own: one flat beside them is named
    with pytest.raises(UserError, match="unknown field 'step_s'"):
        RunRecord.from_json({**json.loads(LINE), "step_s": 0.002})


def test_the_audit_reads_the_records_typed_and_the_halved_batches_from_the_store(tmp_path):
    """The audit has no defaults of its own for a record's fields: it reads `RunRecord`s, as
    the report does, and amendment 5.1's batches as the series reads them."""
    from kit.results import audit
    from kit.results.store import ADJUSTMENTS, ResultsDir

    folder = "runs/0003-m.float32.pytorch.eager/attempt-1"
    files = {f"{folder}/stdout.log": "a" * 64, f"{folder}/stderr.log": "b" * 64}
    record = RunRecord(3, folder, "", RunStatus.OK, "", "local", files=files)
    held = frozenset({f"{folder}/stdout.log"})
    assert audit.missing_files(record, held) == [f"{folder}/stderr.log: raw file missing (run 3)"]
    rd = ResultsDir(tmp_path)
    assert rd.batches() == {}
    (tmp_path / ADJUSTMENTS).write_text(json.dumps({"m": {"batch_size": 6, "because": "…"}}))
    assert rd.batches() == {"m": 6}
