"""The options a series or a correctness check runs under, typed: resolved once from the command
line, kept in the manifest (`to_json`), read back at a resume (`from_json`).

A manifest from an older kit may lack options added since: `from_json` fills them with the
defaults that kit ran with (the upgrade). An option this kit does not know is from a newer one:
refused, naming it. `SideInputs` is what the sides need of a series' or a check's options: the
programs, the trees and the data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kit.errors import UserError


@dataclass(frozen=True)
class SideInputs:
    """What building the sides reads: which sides, their programs and images, the data."""

    sides: tuple[str, ...]
    models: tuple[str, ...]
    data_dir: str
    contender: str | None = None
    nanogpt: str | None = None  # a nanoGPT checkout; None: the kit's checked download
    input: str | None = None  # tiny Shakespeare; None: the kit's checked download
    tiktoken_files: str | None = None
    pytorch_image: str | None = None
    mica_image: str | None = None
    allow_torch: bool = False  # rule 9: a torch other than the pin, as preparation
    python: str | None = None  # the local PyTorch side's interpreter; None: the kit's own


@dataclass(frozen=True)
class SeriesOptions:
    """A series' options, absolute and complete. The field order is the manifest's."""

    protocol: str
    out: str
    smoke: bool
    device: str
    models: tuple[str, ...]
    precisions: tuple[str, ...]
    sides: tuple[str, ...]
    contender: str | None
    nanogpt: str | None
    data_dir: str
    input: str | None = None
    tiktoken_files: str | None = None
    executor: str | None = None  # as asked: "local", "docker", or None for the default
    env: Mapping[str, str] = field(default_factory=dict)  # KEY=VALUE for every run (recorded)
    docker_host: str | None = None
    pytorch_image: str | None = None
    mica_image: str | None = None
    gpu: str | None = None
    refuse_busy: bool = False
    idle_timeout_s: float = 60.0
    allow_torch: bool = False
    aa: tuple[str, ...] = ()  # `--aa`: the A/A rounds' configurations (primary, all, or ids)
    python: str | None = None  # not kept unless set: the local PyTorch side's interpreter

    def to_json(self) -> dict[str, Any]:
        return _to_json(self, omitted=("python",))

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "manifest.json") -> SeriesOptions:
        values = _from_json(cls, d, where, UPGRADES)
        for name in ("models", "precisions", "sides"):
            values[name] = tuple(values[name])
        values["aa"] = tuple(values.get("aa") or ())
        values["env"] = dict(values.get("env") or {})
        return cls(**values)

    def inputs(self) -> SideInputs:
        names = {f.name for f in dataclasses.fields(SideInputs)}
        return SideInputs(**{n: getattr(self, n) for n in names})


# older manifests: the value a required option had before the kit recorded it
UPGRADES: dict[str, Any] = {"nanogpt": None}


@dataclass(frozen=True)
class CheckOptions:
    """A correctness check's options (§7), absolute and complete. The field order is the
    manifest's."""

    protocol: str
    out: str
    method: str  # "A" or "B"
    model: str
    models: tuple[str, ...]  # the one model: what the sides build for
    precision: str
    seeds: tuple[int, ...]
    card: str
    card_info: Mapping[str, Any]  # NVML's account of the card (the name alone on a CPU)
    device: str
    smoke: bool
    sides: tuple[str, ...]
    contender: str | None
    nanogpt: str | None
    input: str | None
    data_dir: str
    tiktoken_files: str | None
    executor: str | None
    docker_host: str | None
    pytorch_image: str | None
    mica_image: str | None
    products: str | None = None  # the card's series, whose products record it reads (7.4)
    batch_size: int | None = None  # amendment 5.1: the batch its series halved, if it did
    products_sha256: str | None = None  # the products record copied in; not kept unless set

    def to_json(self) -> dict[str, Any]:
        return _to_json(self, omitted=("products_sha256",))

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "manifest.json") -> CheckOptions:
        values = _from_json(cls, d, where, {})
        for name in ("models", "seeds", "sides"):
            values[name] = tuple(values[name])
        values["card_info"] = dict(values["card_info"])
        return cls(**values)

    def inputs(self) -> SideInputs:
        names = {f.name for f in dataclasses.fields(SideInputs)} & set(vars(self))
        return SideInputs(**{n: getattr(self, n) for n in names})


def _to_json(options: Any, omitted: tuple[str, ...]) -> dict[str, Any]:
    """The options as the manifest keeps them, in field order; an `omitted` field only if set."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if f.name in omitted and value is None:
            continue
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        out[f.name] = value
    return out


def _from_json(
    cls: Any, d: Mapping[str, Any], where: str, upgrades: Mapping[str, Any]
) -> dict[str, Any]:
    """The fields of `cls` from a manifest's options: a required one that an older kit did not
    record takes `upgrades`' value; one this kit does not know is from a newer kit: refused."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - set(fields))
    if unknown:
        raise UserError(
            f"{where} holds options this kit does not know: {', '.join(unknown)}",
            "resume it with the kit version named in its manifest.json (kit_version)",
        )
    required = [
        n for n, f in fields.items() if f.default is f.default_factory is dataclasses.MISSING
    ]
    missing = [n for n in required if n not in d and n not in upgrades]
    if missing:
        raise UserError(
            f"{where} lacks the options {', '.join(missing)}",
            "the manifest was edited: restore it from a copy of the results directory",
        )
    values = {n: d[n] if n in d else upgrades[n] for n in required}
    values.update({n: d[n] for n in fields if n not in required and n in d})
    return values
