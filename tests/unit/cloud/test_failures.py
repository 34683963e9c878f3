"""Every SkyPilot error `micakit cloud` meets, as what the user reads: exit 2, one `error:` line
saying what SkyPilot said, one `fix:` line (kit/cloud/sky_failures.py's table).

The exceptions are SkyPilot's own where it is installed (the CI's .venv-cloud), else the fake's,
which tests/unit/cloud/test_sdk_signatures.py holds to the real ones' shapes.
"""

from __future__ import annotations

import importlib.util
import warnings
from types import ModuleType

import click
import pytest
from click.testing import CliRunner

from kit.cli.group import KitGroup
from kit.cloud import sky_failures, skypilot
from kit.cloud.rented import Machine
from kit.errors import ExitCode, UserError
from tests.conftest import FAKES

M = Machine("micakit-t1-2", "t1", "gcp", "L4", "g2-standard-8", False)


def _exceptions() -> ModuleType:
    spec = importlib.util.find_spec("sky")
    if spec is not None and "fakes" not in str(spec.origin):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module("sky.exceptions")
    path = FAKES / "skypilot_sdk" / "sky" / "exceptions.py"
    fake = importlib.util.spec_from_file_location("fake_sky_exceptions", path)
    assert fake is not None and fake.loader is not None
    module = importlib.util.module_from_spec(fake)
    fake.loader.exec_module(module)
    return module


X = _exceptions()

# (what SkyPilot raises, what the error line says, how the fix starts)
CASES = [
    (
        lambda: X.CloudError("Compute Engine API has not been used", "gcp", "accessNotConfigured"),
        "the cloud refused: gcp error (accessNotConfigured): Compute Engine API",
        "the cloud's words above name what to change",
    ),
    (
        lambda: ValueError("Invalid instance type 'g9-huge' for cloud GCP."),
        "SkyPilot refused the machine: Invalid instance type 'g9-huge'",
        "check --card, --instance-type and --infra",
    ),
    (
        lambda: X.ClusterNotUpError("'micakit-t1-2' is not up", cluster_status=None),
        "micakit-t1-2 is not up (preempted or stopped)",
        "tear it down with `micakit cloud down SERIES-ID`",
    ),
    (
        lambda: X.ClusterDoesNotExist("Cluster 'micakit-t1-2' does not exist."),
        "micakit-t1-2 no longer exists (preempted, or deleted by autodown or by hand)",
        "what it had not handed back is gone",
    ),
    (
        lambda: X.CommandError(255, "tail -f run.log", "Connection closed", "broken pipe"),
        "a command on micakit-t1-2 failed (status 255): Connection closed",
        "the machine may have vanished mid-job",
    ),
    (
        lambda: X.RequestCancelled("Request 4f2c cancelled"),
        "SkyPilot's request was cancelled: Request 4f2c cancelled",
        "someone ran `sky api cancel`",
    ),
    (
        lambda: X.NotSupportedError("Kubernetes does not support autodown."),
        "SkyPilot does not support this on gcp",
        "the kit needs a VM with Docker",
    ),
    (  # sky/optimizer.py, _check_specified_clouds
        lambda: X.ResourcesUnavailableError(
            "Task 'micakit-t1-2' requires GCP which is not enabled. To enable access, change "
            "the task cloud requirement or run: sky check gcp"
        ),
        "SkyPilot cannot rent on gcp: Task 'micakit-t1-2' requires GCP which is not enabled",
        "run `sky check gcp`",
    ),
    (  # GCP's ZONE_RESOURCE_POOL_EXHAUSTED
        lambda: X.ResourcesUnavailableError(
            "Failed to acquire resources in us-central1-a: ZONE_RESOURCE_POOL_EXHAUSTED"
        ),
        "no machine could be launched, no capacity: Failed to acquire resources",
        "name another zone or region with --infra",
    ),
    (  # GCP's QUOTA_EXCEEDED
        lambda: X.ResourcesUnavailableError(
            "Quota 'NVIDIA_L4_GPUS' exceeded. Limit: 0.0 in region us-central1."
        ),
        "no quota for the machine: Quota 'NVIDIA_L4_GPUS' exceeded",
        "ask the cloud for quota for L4 GPUs",
    ),
    (  # sky/optimizer.py, _optimize_by_dp
        lambda: X.ResourcesUnavailableError(
            "No launchable resource found for task micakit-t1-2. To fix: relax its resource "
            "requirements.\nHint: 'sky gpus list --all'\n 'sky check' to check the clouds."
        ),
        "SkyPilot knows no machine with a L4 on gcp: No launchable resource found",
        "check --card, --instance-type and --infra",
    ),
    (
        lambda: X.NoCloudAccessError("No cloud access available for launching."),
        "no cloud credentials SkyPilot can use",
        "run `sky check`",
    ),
    (
        lambda: X.ApiServerConnectionError("http://127.0.0.1:46580"),
        "SkyPilot's API server does not answer",
        "start it with `sky api start`",
    ),
    (
        lambda: X.ProvisionPrechecksError([X.CloudUserIdentityError("GCP credentials unset")]),
        "SkyPilot refused to launch: GCP credentials unset",
        "run `sky check`",
    ),
]


@pytest.mark.parametrize(("make", "message", "fix"), CASES)
def test_each_skypilot_error_is_exit_2_with_one_error_and_one_fix(
    make, message: str, fix: str
) -> None:
    e = make()
    found = sky_failures.explain(e, M)
    assert found is not None and message in found.message and found.fix.startswith(fix)

    @click.group(cls=KitGroup, name="micakit")
    def cli() -> None:
        pass

    @cli.command("boom")
    def boom() -> None:
        with skypilot.mapped(M):
            raise e

    res = CliRunner().invoke(cli, ["boom"])
    assert res.exit_code == ExitCode.USER_ERROR, res.output
    lines = res.output.splitlines()
    assert [ln for ln in lines if "error:" in ln] == [f"micakit: error: {found.message}"]
    assert [ln.strip() for ln in lines if "fix:" in ln] == [f"fix: {found.fix}"]
    assert "Traceback" not in res.output


def test_an_error_no_row_names_keeps_its_traceback() -> None:
    """A bug is no user error: mapped() lets it through, whole."""
    with pytest.raises(KeyError):
        with skypilot.mapped(M):
            raise KeyError("x")
    assert sky_failures.explain(UserError("x"), M) is None
