import json

import pytest

from kit.errors import UserError
from kit.results.store import ResultsDir, count_lines, write_atomic


def test_existing_directory_is_never_overwritten(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "x").write_text("keep")
    with pytest.raises(UserError, match="already exists") as e:
        ResultsDir.create(tmp_path / "r")
    assert "--resume" in e.value.fix
    assert (tmp_path / "r" / "x").read_text() == "keep"


def test_torn_last_record_is_cut_off(tmp_path):
    rd = ResultsDir.create(tmp_path / "r")
    rd.append_record({"run_id": 0, "status": "ok"})
    rd.append_record({"run_id": 1, "status": "ok"})
    with open(rd.root / "runs.jsonl", "ab") as f:
        f.write(b'{"run_id": 2, "sta')  # power lost mid-write
    assert [r["run_id"] for r in rd.records()] == [0, 1]
    rd.append_record({"run_id": 2, "status": "ok"})
    lines = (rd.root / "runs.jsonl").read_text().splitlines()
    assert [json.loads(x)["run_id"] for x in lines] == [0, 1, 2]


def test_reading_leaves_a_torn_last_record_as_it_is_and_a_writer_cuts_it(tmp_path):
    rd = ResultsDir.create(tmp_path / "r")
    rd.append_record({"run_id": 0, "status": "ok"})
    with open(rd.root / "runs.jsonl", "ab") as f:
        f.write(b'{"run_id": 1, "sta')  # power lost mid-write
    on_disk = (rd.root / "runs.jsonl").read_bytes()
    reader = ResultsDir(rd.root)
    assert [r["run_id"] for r in reader.records()] == [0]
    assert reader.torn() == b'{"run_id": 1, "sta'
    assert (rd.root / "runs.jsonl").read_bytes() == on_disk  # reading never writes
    assert rd.cut_torn() and not rd.cut_torn()
    assert (rd.root / "runs.jsonl").read_bytes() == b'{"run_id": 0, "status": "ok"}\n'
    assert reader.torn() == b""


def test_atomic_write_leaves_no_temporary(tmp_path):
    write_atomic(tmp_path / "a.json", "{}")
    write_atomic(tmp_path / "a.json", '{"x": 1}')
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_attempts_are_kept(tmp_path):
    rd = ResultsDir.create(tmp_path / "r")
    a = rd.new_attempt_dir(3, "cfg")
    b = rd.new_attempt_dir(3, "cfg")
    assert a.name == "attempt-1" and b.name == "attempt-2" and a.exists()


def test_open_refuses_what_is_not_a_results_directory(tmp_path):
    with pytest.raises(UserError, match="not a results directory"):
        ResultsDir.open(tmp_path)
    (tmp_path / "manifest.json").write_text('{"schema": 99}')
    with pytest.raises(UserError, match="schema 99"):
        ResultsDir.open(tmp_path)


def test_stamped_json_files_carry_the_schema_and_readers_see_only_their_data(tmp_path):
    rd = ResultsDir.create(tmp_path / "r")
    rd.write_json("versions.json", {"kit": "0.2.0"})
    on_disk = json.loads((rd.root / "versions.json").read_text())
    assert on_disk == {"schema_version": 2, "kit": "0.2.0"}
    assert rd.read_json("versions.json") == {"kit": "0.2.0"}
    # as an earlier kit stamped it: the version under "schema", read the same
    (rd.root / "versions.json").write_text('{"schema": 1, "kit": "0.1.0"}')
    assert rd.read_json("versions.json") == {"kit": "0.1.0"}


def test_a_json_file_from_before_schemas_is_read_and_a_newer_one_refused(tmp_path):
    rd = ResultsDir.create(tmp_path / "r")
    (rd.root / "gating.json").write_text('{"statuses": {}}')  # schema 0: no field yet
    assert rd.read_json("gating.json") == {"statuses": {}}
    (rd.root / "plan.json").write_text('{"schema_version": 3, "order": []}')
    with pytest.raises(UserError, match=r"plan.json has results schema 3; this kit reads") as e:
        rd.read_json("plan.json")
    assert "kit_version" in e.value.fix


def test_records_are_read_again_after_an_append(tmp_path):
    rd = ResultsDir.create(tmp_path / "r")
    rd.append_record({"run_id": 0, "status": "ok"})
    assert len(rd.records()) == 1
    rd.append_record({"run_id": 1, "status": "ok"})
    assert [r["run_id"] for r in rd.records()] == [0, 1]
    # another writer's append (another process) is seen too
    with open(rd.root / "runs.jsonl", "a") as f:
        f.write(json.dumps({"run_id": 2, "status": "ok"}) + "\n")
    assert [r["run_id"] for r in rd.records()] == [0, 1, 2]


@pytest.mark.parametrize(
    "line",
    [b'{"run_id": 1, "status": "o\xffk"}\n', b'{"run_id": 1, "status": \n', b"not json\n"],
    ids=["not-utf-8", "cut-json", "not-json"],
)
def test_a_line_that_is_no_json_record_is_named_by_its_number(tmp_path, line):
    rd = ResultsDir.create(tmp_path / "r")
    rd.append_record({"run_id": 0, "status": "ok"})
    with open(rd.root / "runs.jsonl", "ab") as f:
        f.write(line + b'{"run_id": 2, "status": "ok"}\n')
    with pytest.raises(UserError, match=r"runs\.jsonl:2 is not a JSON record"):
        ResultsDir(rd.root).records()


def test_blank_lines_are_no_records_and_the_torn_line_is_the_last_only(tmp_path):
    rd = ResultsDir.create(tmp_path / "r")
    (rd.root / "runs.jsonl").write_bytes(b'{"run_id": 0}\n\n  \n{"run_id": 1}\n{"run_id": 2')
    assert [r["run_id"] for r in rd.records()] == [0, 1]
    assert rd.torn() == b'{"run_id": 2'


def test_lines_are_counted_across_blocks_and_a_torn_last_line_is_not_one(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b"")
    assert count_lines(path) == 0
    # lines of 1,000 bytes: many end beyond a 64 KB block, one ends at a block's last byte
    lines = [b"x" * 999 + b"\n"] * 200 + [b"y" * ((1 << 16) * 4 - 200_000 - 1) + b"\n"]
    path.write_bytes(b"".join(lines) + b'{"torn')
    assert (1 << 16) * 4 == sum(map(len, lines))
    assert count_lines(path) == 201 == path.read_bytes().count(b"\n")
