"""How an image was built, as an in-toto statement with a SLSA v1 provenance predicate.

`images build` writes one per image (`<name>.intoto.json`): its subject is the image, by its id
(and, once `images push` has pushed it, by its registry digest too); the predicate names the
builder (the kit's version and commit), the Dockerfile and every file of the build context by
SHA-256 (the contender program and its libraries among them), the base image by id and digest,
each wheel of the wheelhouse, and the build arguments. The statement is written with the
in-toto project's own library (`in-toto-attestation`), not by hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement

from kit import __version__, kit_commit
from kit.errors import UserError
from kit.results.store import sha256_file, write_atomic

PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:micakit:images-build:1"  # what the parameters below mean: `images build`
SUFFIX = ".intoto.json"


def file_name(image_name: str) -> str:
    return image_name + SUFFIX


def _digest(value: str) -> dict[str, str]:
    algorithm, _, hex_digest = value.partition(":")
    return {algorithm: hex_digest} if hex_digest else {"sha256": value}


def _descriptor(name: str, digest: Mapping[str, str], uri: str = "") -> object:
    return ResourceDescriptor(name=name, uri=uri, digest=dict(digest)).pb


def statement(
    image: str,
    image_id: str,
    dockerfile: Path,
    context: Path,
    buildargs: Mapping[str, str],
    base: Mapping[str, str],
    wheels: Iterable[Path],
    started: datetime,
) -> dict:
    """The statement of one build: `base` holds the base image's reference, id and digests."""
    resolved = [_descriptor(f"Dockerfile:{dockerfile.name}", {"sha256": sha256_file(dockerfile)})]
    if base.get("id"):
        digests = {"sha256": _digest(base["id"])["sha256"]}
        uri = f"docker-image://{base['ref']}"
        resolved.append(_descriptor(f"base:{base['ref']}", digests, uri))
        for repo_digest in (base.get("repo_digests") or "").split():
            resolved.append(_descriptor(f"base:{repo_digest}", _digest(repo_digest.split("@")[1])))
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        rel = path.relative_to(context).as_posix()
        resolved.append(_descriptor(f"context:{rel}", {"sha256": sha256_file(path)}))
    for wheel in sorted(wheels):
        resolved.append(_descriptor(f"wheelhouse/{wheel.name}", {"sha256": sha256_file(wheel)}))
    commit = kit_commit()
    started_on, finished_on = Timestamp(), Timestamp()
    started_on.FromDatetime(started)
    finished_on.FromDatetime(datetime.now(UTC))
    predicate = provenance_pb2.Provenance(
        build_definition=provenance_pb2.BuildDefinition(
            build_type=BUILD_TYPE,
            resolved_dependencies=resolved,
        ),
        run_details=provenance_pb2.RunDetails(
            builder=provenance_pb2.Builder(
                id=f"urn:micakit:{__version__}:{commit}",
                version={"micakit": __version__, "commit": commit},
            ),
            metadata=provenance_pb2.BuildMetadata(started_on=started_on, finished_on=finished_on),
        ),
    )
    # the parameters a reader checks: which Dockerfile, with which build arguments
    predicate.build_definition.external_parameters.update(
        {"dockerfile": dockerfile.name, "buildargs": dict(buildargs), "tag": image}
    )
    subject = ResourceDescriptor(name=image, digest=_digest(image_id)).pb
    made = Statement([subject], PREDICATE_TYPE, json_format.MessageToDict(predicate))
    made.validate()
    return dict(json_format.MessageToDict(made.pb))


def write(path: Path, document: Mapping) -> None:
    write_atomic(path, json.dumps(document, indent=2, sort_keys=True) + "\n")


def read(path: Path, image_id: str) -> dict:
    """The statement at `path`, refused unless its subject is the image `image_id` names."""
    if not path.is_file():
        raise UserError(
            f"no provenance statement {path} for the image {image_id[:19]}",
            "build the images with `micakit images build --attestations "
            f"{path.parent}`, which writes one per image, then push them",
        )
    document = json.loads(path.read_text(encoding="utf-8"))
    ids = [s.get("digest", {}).get("sha256") for s in document.get("subject", [])]
    if _digest(image_id)["sha256"] not in ids:
        raise UserError(
            f"{path} is the statement of another build than the image {image_id[:19]}",
            "build the images again with `micakit images build` (it writes their statements), "
            "then push them",
        )
    return document


def with_registry_digest(document: Mapping, repository: str, digest: str) -> dict:
    """The statement with the pushed image as a second subject, by its registry digest."""
    made = Statement.copy_from_pb(json_format.ParseDict(dict(document), Statement([], "", {}).pb))
    pushed = ResourceDescriptor(name=repository, digest=_digest(digest)).pb
    if pushed not in made.pb.subject:
        made.pb.subject.append(pushed)
    made.validate()
    return dict(json_format.MessageToDict(made.pb))
