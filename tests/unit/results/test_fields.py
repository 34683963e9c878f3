"""The per-run fields, declared once (kit.results.fields): each described in summary.json's
schema, read from a run's folder, and left out of verify's recomputation only where a file
written before a later field lacks it."""

from __future__ import annotations

import pandas as pd

from kit.measure import timing
from kit.report import summary
from kit.results import fields, tablefile


def test_every_field_is_described_in_the_summary_schema_with_its_unit():
    described = summary.schema()["properties"]["runs"]["items"]["properties"]
    for f in fields.FIELDS:
        assert f.name in described, f.name
        assert f.name.endswith(f"_{f.unit}") or f.unit in ("", "bytes"), f.name


def test_a_reader_takes_the_judgement_and_the_folder(tmp_path):
    (tmp_path / "stderr.log").write_bytes(b"12345")
    logs = fields.Logs(str(tmp_path))
    assert logs.size("stderr.log") == 5
    assert logs.size("missing.log") is None
    held = fields.Logs(str(tmp_path), {f"{tmp_path}/stderr.log": b"12"})
    assert held.size("stderr.log") == 2  # the bytes verify has just hashed, not read again
    judged = timing.Outcome(timing.OK, 0.5, 0.4, "", 3.25)
    read = fields.read_all(judged, logs)
    assert list(read)[:3] == ["step_s", "own_step_s", "final_loss"]
    assert (read["step_s"], read["own_step_s"], read["final_loss"]) == (0.5, 0.4, 3.25)


def test_a_later_field_is_compared_where_a_record_or_table_carries_it(monkeypatch):
    later = fields.Field("later_bytes", "bytes", lambda o, _: 1, "Int64", later=True)
    monkeypatch.setattr(fields, "FIELDS", (*fields.FIELDS, later))
    monkeypatch.setattr(fields, "LATER", ("later_bytes",))
    always = [f.name for f in fields.FIELDS if not f.later]
    assert [f.name for f in fields.recorded({"step_s": 1.0})] == always
    assert fields.recorded({"later_bytes": 3})[-1] is later
    recomputed = pd.DataFrame({"run_id": [1], "step_s": [0.5], "later_bytes": [7]})
    older = recomputed.drop(columns=["later_bytes"])
    as_older = tablefile.as_older(older, recomputed, tablefile.TABLE_SCHEMA)
    assert list(as_older.columns) == ["run_id", "step_s"]
    # a table that carries it is compared on it
    same = tablefile.as_older(recomputed, recomputed, tablefile.TABLE_SCHEMA)
    assert list(same.columns) == list(recomputed.columns)
