"""The SBOM as the tools that read SBOMs read it (the dev extra installs them from PyPI):
cyclonedx-python-lib's strict validator (CycloneDX 1.6's published JSON schema), lib4sbom's
parser (what sbom2doc and sbomaudit count as packages and relationships), sbomaudit (the NTIA
minimum elements: supplier, name, version, identifier, relationships, author, timestamp) and
packageurl-python (each purl, with `distro` on every Debian package, as scanners match Debian's
advisories). `consumers_read` is shared with the test that holds a real image's SBOM to the
same (tests/integration/test_sbom_consumers.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from lib4sbom.parser import SBOMParser
from packageurl import PackageURL
from sbomaudit.audit import SBOMaudit

from kit.executors.docker import inventory, sbom
from tests.unit.executors.test_sbom import STATUS, FakeClient

# lib4sbom opens its license lists and leaves them to the collector (lib4sbom/license.py,
# LicenseScanner.__init__): a warning of theirs, not the kit's
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@dataclass(frozen=True)
class Read:
    """What the consumers made of one SBOM."""

    schema_errors: str  # the validator's, "" where none
    ntia_conformant: bool  # sbomaudit's verdict, offline
    packages: int  # lib4sbom's count
    relationships: int
    purls: dict[str, PackageURL]  # by component name, each parsed


def consumers_read(path: Path) -> Read:
    text = path.read_text(encoding="utf-8")
    errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    parser = SBOMParser()
    parser.parse_file(str(path))
    # offline: no look-up of each package's latest release; output named: nothing printed
    audit = SBOMaudit({"offline": True, "purlcheck": True}, output="audit.json")
    conformant = bool(audit.audit_sbom(parser))
    doc = json.loads(text)
    purls = {c["name"]: PackageURL.from_string(c["purl"]) for c in doc["components"] if "purl" in c}
    return Read(
        str(errors or ""),
        conformant,
        len(parser.get_packages()),
        len(parser.get_relationships()),
        purls,
    )


def test_the_consumers_read_the_fixture_images_sbom(tmp_path: Path):
    folder = tmp_path / "contender"
    inventory.footprint(FakeClient(), "micakit-mica:t", folder)  # type: ignore[arg-type]
    got = consumers_read(folder / sbom.SBOM_NAME)
    assert got.schema_errors == ""
    assert got.ntia_conformant
    installed = STATUS.count("Status: install ok installed")
    # each Debian package installed, numpy and torch, the program, its library, the OS
    assert got.packages == installed + 2 + 2 + 1
    debs = {n: p for n, p in got.purls.items() if p.type == "deb"}
    assert len(debs) == installed
    assert all(p.qualifiers["distro"] == "debian-12" for p in debs.values())  # type: ignore[index]
    assert debs["libssl3"].qualifiers["upstream"] == "openssl"  # type: ignore[index]
    assert got.purls["torch"].to_dict()["version"] == "2.13.0"
    # the image on the OS and the rest, the OS on its packages, and dpkg's and pip's edges
    assert got.relationships == 5 + installed + 2 + 2 + 1


def test_an_sbom_missing_a_supplier_is_not_conformant(tmp_path: Path):
    folder = tmp_path / "contender"
    inventory.footprint(FakeClient(), "micakit-mica:t", folder)  # type: ignore[arg-type]
    path = folder / sbom.SBOM_NAME
    doc = json.loads(path.read_text())
    del next(c for c in doc["components"] if c["name"] == "mawk")["supplier"]
    path.write_text(json.dumps(doc))
    assert not consumers_read(path).ntia_conformant  # the check can fail
