"""A series' options are typed: kept in the manifest as they always were, read back at a
resume, an older manifest's missing options filled in, a newer one's unknown options refused."""

from __future__ import annotations

import pytest

from kit.errors import UserError
from kit.results.run_options import CheckOptions, SeriesOptions

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
    "aa": ["primary"],
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
    assert SeriesOptions.from_json({k: v for k, v in older.items() if k != "aa"}).aa == ()


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
    check = {k: v for k, v in KEPT.items() if k not in ("precisions", "env", "refuse_busy",
             "idle_timeout_s", "allow_torch", "gpu", "aa")}  # fmt: skip
    check |= {"method": "A", "model": "shakespeare-char", "precision": "float32", "seeds": [1],
              "card": "cpu", "card_info": {"name": "cpu"}}  # fmt: skip
    assert o.inputs() == CheckOptions.from_json(check).inputs()
    assert o.inputs().contender == "/bin/mica" and o.inputs().python is None


def test_a_checks_options_are_kept_in_the_manifest_as_resolved_and_read_back():
    check = {
        "protocol": "/p/protocol.toml", "out": "/r/c", "method": "B", "model": "m",
        "models": ["m"], "precision": "float32", "seeds": [1337], "card": "cpu",
        "card_info": {"name": "cpu"}, "device": "cpu", "smoke": True,
        "sides": ["pytorch", "contender"], "contender": "/bin/mica", "nanogpt": None,
        "input": None, "data_dir": "/r/c/work/data", "tiktoken_files": None, "executor": None,
        "docker_host": None, "pytorch_image": None, "mica_image": None, "products": None,
        "batch_size": None,
    }  # fmt: skip
    o = CheckOptions.from_json(check)
    assert o.seeds == (1337,) and o.to_json() == check and list(o.to_json()) == list(check)
    with pytest.raises(UserError, match="options this kit does not know: turbo"):
        CheckOptions.from_json({**check, "turbo": True})
    with pytest.raises(UserError, match="lacks the options method"):
        CheckOptions.from_json({k: v for k, v in check.items() if k != "method"})
