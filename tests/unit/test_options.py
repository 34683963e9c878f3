"""A series' options are typed: kept in the manifest as they always were, read back at a
resume, an older manifest's missing options filled in, a newer one's unknown options refused."""

from __future__ import annotations

import pytest

from kit.engine.options import SeriesOptions, SideInputs
from kit.errors import UserError

KEPT = {
    "protocol": "/p/protocol.toml",
    "out": "/r/s",
    "smoke": True,
    "device": "cpu",
    "models": ["shakespeare-char"],
    "precisions": ["float32", "float16"],
    "sides": ["pytorch", "contender"],
    "contender": "/bin/mica",
    "nanogpt": None,
    "data_dir": "/r/s/work/data",
    "input": "/d/input.txt",
    "tiktoken_files": None,
    "executor": "local",
    "env": {"A": "1"},
    "docker_host": None,
    "pytorch_image": None,
    "mica_image": None,
    "gpu": None,
    "refuse_busy": False,
    "idle_timeout_s": 60.0,
    "allow_torch": False,
}


def test_the_manifest_keeps_the_options_as_before_in_the_same_order():
    o = SeriesOptions.from_json(KEPT)
    assert o.models == ("shakespeare-char",) and o.env == {"A": "1"}
    assert list(o.to_json()) == list(KEPT)
    assert o.to_json() == KEPT


def test_an_older_manifest_gets_the_defaults_its_kit_ran_with():
    older = {k: v for k, v in KEPT.items() if k not in ("allow_torch", "gpu", "nanogpt", "env")}
    o = SeriesOptions.from_json(older)
    assert (o.allow_torch, o.gpu, o.nanogpt, o.env) == (False, None, None, {})


def test_an_unknown_option_is_from_a_newer_kit_and_refused_by_name():
    with pytest.raises(UserError, match="options this kit does not know: turbo") as e:
        SeriesOptions.from_json({**KEPT, "turbo": True})
    assert e.value.fix and "kit_version" in e.value.fix


def test_a_manifest_without_a_required_option_is_refused():
    broken = {k: v for k, v in KEPT.items() if k != "device"}
    with pytest.raises(UserError, match="lacks the options device"):
        SeriesOptions.from_json(broken)


def test_the_sides_read_the_same_inputs_from_a_series_or_a_check():
    o = SeriesOptions.from_json(KEPT)
    assert o.inputs() == SideInputs.of({**KEPT, "method": "A", "seeds": [1]})
    assert o.inputs().contender == "/bin/mica" and o.inputs().python is None
