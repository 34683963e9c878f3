"""Registry names, the refusals of a push or a pull, and what a resume compares of an image."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kit.cli.main import main
from kit.errors import UserError
from kit.executors.docker import registries
from kit.results import documents


@pytest.mark.parametrize(
    "given, kept",
    [
        ("ghcr.io/owner", "ghcr.io/owner"),
        ("ghcr.io/owner/", "ghcr.io/owner"),
        ("127.0.0.1:5000/ci", "127.0.0.1:5000/ci"),
        ("localhost:5000", "localhost:5000"),
        ("registry.example.org/team/sub-team", "registry.example.org/team/sub-team"),
    ],
)
def test_a_registry_and_namespace_are_kept(given, kept):
    assert registries.check_registry(given) == kept


@pytest.mark.parametrize(
    "given, fix",
    [
        ("https://ghcr.io/owner", "--registry ghcr.io/owner"),
        ("ghcr.io/Owner", "--registry ghcr.io/owner"),
        ("ghcr.io/own er", "HOST[:PORT]/NAMESPACE"),
        ("ghcr.io//owner", "HOST[:PORT]/NAMESPACE"),
    ],
)
def test_a_registry_images_cannot_name_says_what_would_do(given, fix):
    with pytest.raises(UserError) as e:
        registries.check_registry(given)
    assert fix in (e.value.fix or "")


def test_tags():
    assert registries.check_tag("0.1.0-0123456789ab") == "0.1.0-0123456789ab"
    for bad in ("", "-x", ".x", "a/b", "x" * 129):
        with pytest.raises(UserError):
            registries.check_tag(bad)


@pytest.mark.parametrize(
    "ref, named",
    [
        ("ghcr.io/owner/micakit-pytorch:0.1.0", True),
        ("127.0.0.1:5000/ci/micakit-mica:x", True),
        ("localhost/micakit:x", True),
        ("micakit-mica@sha256:" + "a" * 64, True),
        ("micakit-pytorch:0.1.0-abc", False),  # a local build's name: never looked up on Hub
        ("owner/micakit:0.1.0", False),
    ],
)
def test_which_references_are_pulled(ref, named):
    assert registries.names_registry(ref) is named


def test_references_split_into_repository_tag_and_digest():
    d = "sha256:" + "b" * 64
    assert registries._split("127.0.0.1:5000/ci/micakit:v1") == (
        "127.0.0.1:5000/ci/micakit",
        "v1",
        "",
    )
    assert registries._split("127.0.0.1:5000/ci/micakit") == (
        "127.0.0.1:5000/ci/micakit",
        "latest",
        "",
    )
    assert registries._split(f"ghcr.io/o/micakit@{d}") == ("ghcr.io/o/micakit", "latest", d)
    assert registries._split(f"ghcr.io/o/micakit:v1@{d}") == ("ghcr.io/o/micakit", "v1", d)


@pytest.mark.parametrize(
    "error, fix",
    [
        ("unauthorized: authentication required", "docker login ghcr.io"),
        ("no basic auth credentials", "docker login ghcr.io"),
        (
            "unauthenticated: User cannot be authenticated with the token provided.",
            "docker login ghcr.io",
        ),
        ("denied: permission_denied: write_package", "packages: write"),
        ('Get "http://ghcr.io/v2/": dial tcp: connection refused', "insecure-registries"),
        ("http: server gave HTTP response to HTTPS client", "insecure-registries"),
        ("blob upload unknown", "the registry's message"),
    ],
)
def test_a_refused_push_is_the_users_to_fix(error, fix):
    e = registries._refused("ghcr.io/o/micakit:v1", "ghcr.io", error)
    assert isinstance(e, UserError) and error in e.message
    assert fix in (e.fix or "")


def test_a_push_after_the_start_does_not_stop_a_resume():
    image = {"image": "micakit-pytorch:x", "image_id": "sha256:" + "1" * 64, "repo_digests": []}
    pushed = {**image, "repo_digests": ["ghcr.io/o/micakit-pytorch@sha256:" + "2" * 64]}
    documents.check_unchanged({"images": {"pytorch": image}}, {"images": {"pytorch": pushed}})
    rebuilt = {**image, "image_id": "sha256:" + "3" * 64}
    with pytest.raises(UserError, match="images.pytorch.image_id"):
        documents.check_unchanged({"images": {"pytorch": image}}, {"images": {"pytorch": rebuilt}})


def test_push_refuses_a_bad_registry_before_asking_any_engine():
    res = CliRunner().invoke(
        main, ["images", "push", "--registry", "ghcr.io/Owner", "--docker-host", "tcp://0.0.0.0:1"]
    )
    assert res.exit_code == 2
    assert "lower case" in res.stderr and "--registry ghcr.io/owner" in res.stderr
    res = CliRunner().invoke(main, ["images", "push", "--registry", "ghcr.io/o", "--tag", "-x"])
    assert res.exit_code == 2 and "not an image tag" in res.stderr


def test_rerun_sh_names_each_image_by_its_registry_digest(tmp_path):
    import json

    from kit.report import rerun
    from kit.results.store import ResultsDir

    runner = "ghcr.io/o/micakit@sha256:" + "1" * 64
    pytorch = "ghcr.io/o/micakit-pytorch@sha256:" + "2" * 64
    manifest = {"schema": 1, "kit_version": "0.2.0", "executor": "docker",
                "options": {"sides": ["pytorch"], "device": "cuda"}}  # fmt: skip
    found = {
        "images": {
            "runner": {
                "image": "sha256:" + "3" * 64,
                "image_id": "sha256:" + "3" * 64,
                "repo_digests": [runner],
            },  # fmt: skip
            "pytorch": {
                "image": "ghcr.io/o/micakit-pytorch:0.2.0",
                "repo_digests": [pytorch],
                "image_id": "sha256:" + "4" * 64,
            },  # fmt: skip
        }
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "versions.json").write_text(json.dumps(found))
    text = rerun.script(ResultsDir(tmp_path))
    assert f"IMAGE=${{IMAGE:-{runner}}}" in text
    assert f"PYTORCH_IMAGE=${{PYTORCH_IMAGE:-{pytorch}}}" in text
    assert f"PYTORCH_IMAGE_ID=sha256:{'4' * 64}" in text
