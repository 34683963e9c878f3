"""Every call kit/cloud/skypilot.py makes, held against the installed SkyPilot SDK's signatures
and schema, and against the fake's (tests/fakes/skypilot_sdk/sky), so neither can drift.

Skipped where the real `sky` is not installed (`pip install 'micakit[cloud]'`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import warnings
from pathlib import Path

import pytest

from kit.cloud import sky_failures, skypilot, task, yamlish
from kit.cloud.rented import Machine
from tests.conftest import FAKES


def _real():
    if importlib.util.find_spec("sky") is None:
        pytest.skip("SkyPilot is not installed (pip install 'micakit[cloud]')")
    sky = _quietly("sky")
    if str(getattr(sky, "__version__", "")).endswith("-fake"):
        pytest.skip("the fake SDK is on the path, not SkyPilot")
    return sky


def _quietly(name: str):
    """Import a module of SkyPilot: its own imports warn (SQLAlchemy's deprecations), and the
    suite treats warnings as errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(name)


def _fake(monkeypatch: pytest.MonkeyPatch):
    """The fake, imported under another name than the real `sky` it stands for."""
    spec = importlib.util.spec_from_file_location(
        "sky", FAKES / "skypilot_sdk" / "sky" / "__init__.py",
        submodule_search_locations=[str(FAKES / "skypilot_sdk" / "sky")],
    )  # fmt: skip
    real = {k: v for k, v in sys.modules.items() if k == "sky" or k.startswith("sky.")}
    for k in real:
        monkeypatch.delitem(sys.modules, k)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "sky", module)
    spec.loader.exec_module(module)
    cluster_utils = importlib.import_module("sky.utils.cluster_utils")  # the fake's
    importlib.import_module("sky.server.common")
    fake = {k: v for k, v in sys.modules.items() if k == "sky" or k.startswith("sky.")}
    for k, v in real.items():  # the real SDK back for what follows
        monkeypatch.setitem(sys.modules, k, v)
    return module, fake["sky.catalog"], cluster_utils.SSHConfigHelper, fake


M = Machine("micakit-t1-1", "t1", "gcp", "L4", "g2-standard-8", False, also=("g2-standard-12",))
MOUNTS = task.mounts(None)
ENVS = {"MICAKIT_NAME": "machine-1"}


def _calls(sky, catalog, ssh) -> list[tuple[object, tuple, dict]]:
    """(function, args, keywords) of each call the kit makes, as kit/cloud makes it."""
    return [
        (sky.Resources, (), skypilot.resources_args(M)),
        (sky.Task, (), {**skypilot.task_args(M, "bash x", ENVS, MOUNTS), "resources": None}),
        (sky.launch, (object(),), skypilot.launch_args(M, 30)),
        (sky.stream_and_get, ("request",), {"output_stream": sys.stderr}),
        (sky.get, ("request",), {}),
        (sky.tail_logs, ("micakit-t1-1", 1), {"follow": True, "output_stream": sys.stderr}),
        (sky.job_status, ("micakit-t1-1", [1]), {}),
        (sky.down, ("micakit-t1-1",), {}),
        (sky.api_cancel, (["request"],), {"silent": True}),
        (sky.status, (), {"refresh": sky.StatusRefreshMode.FORCE}),
        (sky.status, (["micakit-t1-1"],), {"all_users": True, "_include_credentials": True}),
        (ssh.add_cluster, ("micakit-t1-1", "c", ["1.2.3.4"], {}, [22], None, "gcpuser"), {}),
        (ssh.remove_cluster, ("micakit-t1-1",), {}),
        (catalog.get_region_zones_for_instance_type, ("g2-standard-8", False), {"clouds": "gcp"}),
        (catalog.get_hourly_cost, ("g2-standard-8", False, "us-central1", None), {"clouds": "gcp"}),
        (
            catalog.get_accelerator_hourly_cost,
            ("L4", 1, False, "us-central1", None),
            {"clouds": "gcp"},
        ),
        (
            catalog.get_instance_type_for_accelerator,
            ("L4", 1),
            {"use_spot": False, "clouds": "gcp"},
        ),
        (catalog.get_region_zones_for_accelerators, ("L4", 1, False), {"clouds": "gcp"}),
        (catalog.instance_type_exists, ("g2-standard-8",), {"clouds": "gcp"}),
        (catalog.validate_region_zone, ("us-central1", None), {"clouds": "gcp"}),
    ]


def test_each_call_binds_to_the_installed_sdk_and_to_the_fake(monkeypatch) -> None:
    sky = _real()
    catalog = _quietly("sky.catalog")
    ssh = _quietly("sky.utils.cluster_utils").SSHConfigHelper
    fake, fake_catalog, fake_ssh, _ = _fake(monkeypatch)
    for (real_fn, args, kwargs), (fake_fn, _, _) in zip(
        _calls(sky, catalog, ssh), _calls(fake, fake_catalog, fake_ssh)
    ):
        inspect.signature(real_fn).bind(*args, **kwargs)  # TypeError where the kit drifted
        inspect.signature(fake_fn).bind(*args, **kwargs)
        real_names = set(inspect.signature(real_fn).parameters)
        fake_names = {
            n for n, p in inspect.signature(fake_fn).parameters.items()
            if p.kind is not p.VAR_KEYWORD
        }  # fmt: skip
        assert fake_names <= real_names, (
            f"{real_fn.__name__}: the fake has {fake_names - real_names}"
        )


# every SkyPilot error kit/cloud/sky_failures.py maps, and those the fake raises
EXCEPTIONS = (
    "CloudError", "ResourcesUnavailableError", "ProvisionPrechecksError", "CommandError",
    "ClusterNotUpError", "ClusterDoesNotExist", "NotSupportedError", "CloudUserIdentityError",
    "NoCloudAccessError", "RequestCancelled", "ApiServerConnectionError",
)  # fmt: skip


def test_the_fakes_exceptions_are_the_real_ones_in_shape(monkeypatch) -> None:
    """Each of the fake's exception classes: the real one's name, bases (by name) and
    constructor parameters, so that what the kit catches and builds is what SkyPilot raises."""
    sky = _real()
    _, _, _, fake = _fake(monkeypatch)
    rules = {name for name, _ in sky_failures.RULES}
    for name in EXCEPTIONS:
        real, made = getattr(sky.exceptions, name), getattr(fake["sky.exceptions"], name)
        assert [k.__name__ for k in real.__mro__] == [k.__name__ for k in made.__mro__], name
        real_params = list(inspect.signature(real.__init__).parameters)
        assert list(inspect.signature(made.__init__).parameters) == real_params, name
        assert name in rules or any(k.__name__ in rules for k in real.__mro__), name
    common, fake_common = _quietly("sky.server.common"), fake["sky.server.common"]
    for fn in ("get_api_server_status", "is_api_server_local"):
        real_names = list(inspect.signature(getattr(common, fn)).parameters)
        assert list(inspect.signature(getattr(fake_common, fn)).parameters) == real_names
    assert "HEALTHY" in common.ApiServerStatus.__members__


def test_the_exceptions_and_status_fields_the_kit_reads_exist() -> None:
    sky = _real()
    for name in EXCEPTIONS:
        assert isinstance(getattr(sky.exceptions, name), type), name
    inspect.signature(sky.exceptions.ProvisionPrechecksError).bind([ValueError("x")])
    inspect.signature(sky.exceptions.ApiServerConnectionError).bind("http://127.0.0.1:46580")
    responses = _quietly("sky.schemas.api.responses")
    fields = set(responses.StatusResponse.model_fields)
    assert {
        "name", "status", "labels", "autostop", "to_down", "region", "handle", "credentials"
    } <= fields  # fmt: skip
    assert "FORCE" in sky.StatusRefreshMode.__members__


def test_the_task_passes_skypilots_own_schema(tmp_path: Path) -> None:
    """The task as `cloud run --dry-run` prints it, read back as YAML, is a task SkyPilot takes:
    its schema, and its own Task.from_yaml_config (any_of, autostop, labels)."""
    sky = _real()
    yaml = _quietly("yaml")
    schemas = _quietly("sky.utils.schemas")
    common_utils = _quietly("sky.utils.common_utils")
    config = skypilot.task_yaml(M, task.run_command(), ENVS, MOUNTS, 15)
    printed = yaml.safe_load(yamlish.dump(config))
    assert printed == config
    common_utils.validate_schema(printed, schemas.get_task_schema(), "Invalid task YAML: ")
    assert printed["file_mounts"] == {task.REMOTE_SCRIPT: str(task.script())}
    t = sky.Task.from_yaml_config(printed)
    assert sorted(r.instance_type for r in t.resources) == ["g2-standard-12", "g2-standard-8"]
    assert all(r.labels == {"micakit": "t1"} for r in t.resources)
