"""How an image was built, as an in-toto statement with a SLSA v1 provenance predicate.

`images build` writes one per image (`<name>.intoto.json`): its subject is the image, by its id
(and, once `images push` has pushed it, by its registry digest too); the predicate names the
builder, the source (repository and commit) and the build arguments as external parameters,
and every resolved dependency by a uri and a digest: the Dockerfile and every file of the build
context by SHA-256 (the contender program and its libraries among them), the base image by id
and digest, each wheel of the wheelhouse by name, version and SHA-256, and each Debian package
the build fetched (`apt-get install`) by name and version.

The builder is the build platform where there is one: on GitHub Actions, `builder.id` is the
workflow's URI (`https://github.com/OWNER/REPO/.github/workflows/images.yml@REF`) and the
`invocationId` the run's URL, as SLSA's GitHub builders name them; a local build names the kit
(`urn:micakit:VERSION:COMMIT`) and says so in `internalParameters`. The statement is written
with the in-toto project's own library (`in-toto-attestation`), not by hand.
"""

from __future__ import annotations

import configparser
import json
import os
import re
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
from kit.executors.docker.sbom_packages import pypi_name
from kit.results.store import sha256_file, write_atomic

PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:micakit:images-build:1"  # what the parameters below mean: `images build`
SUFFIX = ".intoto.json"
LOCAL_BUILDER = "local: built outside a build platform; builder.id is the kit's own"


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
    apt: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict:
    """The statement of one build: `base` holds the base image's reference, id and digests;
    `apt` the purls of the Debian packages the build installed; `environ` the variables that
    say which platform built it (default: this process's)."""
    env = os.environ if environ is None else environ
    platform = _platform(env)
    commit = env.get("GITHUB_SHA") if platform else None
    commit = commit or kit_commit()
    repository = _repository(env)
    source = f"git+{repository}@{commit}" if repository else ""
    dockerfile_uri = (
        f"{source}#kit/files/{dockerfile.name}" if source else f"file:{dockerfile.name}"
    )
    resolved = [
        _descriptor(
            f"Dockerfile:{dockerfile.name}", {"sha256": sha256_file(dockerfile)}, dockerfile_uri
        )
    ]
    resolved += _base(base)
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        rel = path.relative_to(context).as_posix()
        # a file the kit put in the build context: a path inside it
        resolved.append(_descriptor(f"context:{rel}", {"sha256": sha256_file(path)}, f"file:{rel}"))
    for wheel in sorted(wheels):
        name, version = wheel.name.split("-")[:2]
        uri = f"pkg:pypi/{pypi_name(name)}@{version}?file_name={wheel.name}"
        resolved.append(
            _descriptor(f"wheelhouse/{wheel.name}", {"sha256": sha256_file(wheel)}, uri)
        )
    for purl in sorted(apt):
        resolved.append(
            ResourceDescriptor(name=f"apt:{purl.split('/')[2].split('@')[0]}", uri=purl).pb
        )
    predicate = _predicate(resolved, platform, commit, started, env)
    # the parameters a reader checks: which source, which Dockerfile, which build arguments
    predicate.build_definition.external_parameters.update(
        {
            "source": {"repository": repository, "commit": commit},
            "dockerfile": dockerfile.name,
            "buildargs": dict(buildargs),
            "tag": image,
        }
    )
    subject = ResourceDescriptor(name=image, digest=_digest(image_id)).pb
    made = Statement([subject], PREDICATE_TYPE, json_format.MessageToDict(predicate))
    made.validate()
    return dict(json_format.MessageToDict(made.pb))


def _base(base: Mapping[str, str]) -> list:
    """The base image, by id and by each registry digest it has."""
    if not base.get("id"):
        return []
    out = [
        _descriptor(
            f"base:{base['ref']}",
            {"sha256": _digest(base["id"])["sha256"]},
            f"docker-image://{base['ref']}",
        )
    ]
    for repo_digest in (base.get("repo_digests") or "").split():
        digest = _digest(repo_digest.split("@")[1])
        out.append(_descriptor(f"base:{repo_digest}", digest, f"docker-image://{repo_digest}"))
    return out


def _predicate(
    resolved: list, platform: str, commit: str, started: datetime, env: Mapping[str, str]
) -> provenance_pb2.Provenance:
    started_on, finished_on = Timestamp(), Timestamp()
    started_on.FromDatetime(started)
    finished_on.FromDatetime(datetime.now(UTC))
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    run = (
        f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
        f"/attempts/{env.get('GITHUB_RUN_ATTEMPT', '1')}"
        if platform
        else ""
    )
    predicate = provenance_pb2.Provenance(
        build_definition=provenance_pb2.BuildDefinition(
            build_type=BUILD_TYPE,
            resolved_dependencies=resolved,
        ),
        run_details=provenance_pb2.RunDetails(
            builder=provenance_pb2.Builder(
                id=platform or f"urn:micakit:{__version__}:{commit}",
                version={"micakit": __version__, "commit": kit_commit()},
            ),
            metadata=provenance_pb2.BuildMetadata(
                invocation_id=run, started_on=started_on, finished_on=finished_on
            ),
        ),
    )
    predicate.build_definition.internal_parameters.update(
        {"builder": "github-actions" if platform else LOCAL_BUILDER}
    )
    return predicate


def _platform(env: Mapping[str, str]) -> str:
    """The build platform's builder id: the workflow's URI on GitHub Actions, else ""."""
    ref = env.get("GITHUB_WORKFLOW_REF", "")
    if env.get("GITHUB_ACTIONS") != "true" or not ref or not env.get("GITHUB_RUN_ID"):
        return ""
    return f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{ref}"


def _repository(env: Mapping[str, str]) -> str:
    """The source repository's URL: GitHub's where it built, else the checkout's `origin`
    (read from its git config, as kit_commit reads HEAD), else ""."""
    if env.get("GITHUB_REPOSITORY"):
        return f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{env['GITHUB_REPOSITORY']}"
    git = Path(__file__).resolve().parents[3] / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH", its config in the common folder
            git = Path(git.read_text().split(":", 1)[1].strip())
            common = git / "commondir"
            if common.is_file():
                git = git / common.read_text().strip()
        config = configparser.ConfigParser(strict=False, interpolation=None)
        config.read_string(re.sub(r"^\s+", "", (git / "config").read_text(), flags=re.MULTILINE))
        return config.get('remote "origin"', "url", fallback="")
    except (OSError, IndexError, configparser.Error):
        return ""


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
