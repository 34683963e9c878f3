"""`micakit verify` checks each measured image's bill of materials against its footprint (§8):
a series directory with a footprint verifies clean; an edited SBOM, or a package dropped from
it, is named, exit 4; a footprint an earlier kit wrote, without an SBOM, still verifies clean."""

from __future__ import annotations

import json

import pytest

from kit.executors.docker import inventory
from tests.conftest import contender_args
from tests.unit.executors.test_sbom import FakeClient

pytestmark = pytest.mark.slow  # a series, then verify three times: seconds


def test_verify_names_an_edited_sbom_and_a_dropped_file(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    assert cli(*contender_args(out, fast_protocol)).exit_code == 0
    folder = out / "footprint" / "contender"
    inventory.footprint(FakeClient(), "micakit-mica:t", folder)  # type: ignore[arg-type]
    assert cli("publish", out).exit_code == 0  # the report tells the footprint now
    clean = cli("verify", out)
    assert clean.exit_code == 0, clean.output

    sbom = folder / "sbom.cdx.json"
    original = sbom.read_text()
    doc = json.loads(original)
    coreutils = next(c for c in doc["components"] if c["name"] == "coreutils")
    measured = coreutils["properties"][1]["value"]
    coreutils["properties"][1] = {"name": "micakit:size_bytes", "value": "99"}
    sbom.write_text(json.dumps(doc))
    edited = cli("verify", out)
    assert edited.exit_code == 4
    assert (
        "footprint/contender/sbom.cdx.json: differs from the SBOM footprint.json hashed"
        in edited.output
    )
    assert (
        f"{coreutils['bom-ref']}: 4 files of 99 bytes in the SBOM, 4 files of {measured} bytes "
        "in files.tsv" in edited.output
    )

    doc = json.loads(original)
    doc["components"] = [c for c in doc["components"] if c["name"] != "mawk"]
    sbom.write_text(json.dumps(doc))
    dropped = cli("verify", out)
    assert dropped.exit_code == 4
    assert "/usr/bin/mawk: belongs to pkg:deb/debian/mawk@" in dropped.output

    # as an earlier kit wrote it: no SBOM, footprint.json naming none
    sbom.unlink()
    record = json.loads((folder / "footprint.json").read_text())
    del record["sbom"]
    (folder / "footprint.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    older = cli("verify", out)
    assert older.exit_code == 0, older.output
