"""The two sides of a comparison: how each configuration's run is started.

A side turns a configuration into a `RunSpec`; it never measures anything. Both sides' runs are
read by the same outside clock (§3 rule 3).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.errors import UserError
from kit.executors.base import Executor, Mount, RunSpec
from kit.protocol.load import Grammar, Protocol
from kit.results import store
from kit.results.planned import CONTENDER, PYTORCH, Config
from kit.sides import versions
from kit.sides.workspace import PATCHED, SHIPPED

SEED = 1337  # nanoGPT's own seed; timing runs use it on both sides


@dataclass(frozen=True)
class RunContext:
    """What a run needs from the series: where things are, and which run this is."""

    protocol: Protocol
    executor: Executor
    device: str  # "cuda" or "cpu"
    gpu: str | None  # the card for the Docker device request
    work: Path  # the series' scratch folder (out_dir, products records)
    smoke: bool = False
    env: dict[str, str] = dataclasses.field(default_factory=dict)  # --env, for both sides' runs


class Side(abc.ABC):
    name: str
    image: str | None = None  # its measured image (§8) under the Docker executor; None: here

    @abc.abstractmethod
    def grammar(self, protocol: Protocol) -> Grammar: ...

    @abc.abstractmethod
    def spec(
        self,
        config: Config,
        label: str,
        ctx: RunContext,
        *,
        extra_mounts: tuple[Mount, ...] = (),
        batch_size: int | None = None,
    ) -> RunSpec:
        """A run of `config`; the engine passes the batch amendment 5.1 halved, the checks
        their mounts, and each side takes options of its own beside these."""

    def variants(self, protocol: Protocol, precision: str, smoke: bool) -> list[tuple[str, bool]]:
        """The variants this side runs for a precision, each with whether it is primary."""
        raise NotImplementedError

    @abc.abstractmethod
    def versions(
        self, ctx: RunContext, scratch: Path, recorded: Mapping[str, Any] | None = None
    ) -> dict:
        """What this side runs with (rule 4), read where its runs run; `recorded` is what the
        series recorded at its start, on a resume."""


def fill_template(template: list[str], values: dict[str, str], where: str) -> list[str]:
    try:
        return [item.format(**values) for item in template]
    except (KeyError, IndexError, ValueError) as e:
        raise UserError(
            f"protocol file: {where} uses an unknown placeholder {e}",
            f"the placeholders are {', '.join('{' + k + '}' for k in values)}",
        ) from None


class ContenderSide(Side):
    """Any program that keeps the contract of D4 (the Mica program, or a stand-in)."""

    name = CONTENDER

    def __init__(
        self, program: Path, data: Path, image: str | None = None, image_program: str | None = None
    ) -> None:
        self.program = program
        self.data = data
        self.image = image
        self.image_program = image_program  # where its measured image holds the program

    def grammar(self, protocol: Protocol) -> Grammar:
        return protocol.contender

    def variants(self, protocol: Protocol, precision: str, smoke: bool) -> list[tuple[str, bool]]:
        return [(b.name, b.primary) for b in protocol.builds_for(precision)]

    def versions(
        self, ctx: RunContext, scratch: Path, recorded: Mapping[str, Any] | None = None
    ) -> dict:
        program = Mount("program", self.program.parent)
        argv = (
            f"{ctx.executor.where(program)}/{self.program.name}",
            *ctx.protocol.contender.version_args,
        )
        spec = RunSpec("versions of the contender", argv, mounts=(program,), image=self.image)
        said = versions.contender_versions(ctx.executor, spec, ctx.protocol, scratch, recorded)
        said["program_sha256"] = store.sha256_file(self.program)
        # the contender's identity, compared at every resume whatever it says of itself: its
        # program's SHA-256, or under Docker its measured image's id
        images = ctx.executor.images
        said["identity"] = (
            (images.info(self.image) if images else {}).get("image_id", self.image)
            if self.image
            else f"sha256:{said['program_sha256']}"
        )
        return said

    def spec(
        self,
        config: Config,
        label: str,
        ctx: RunContext,
        *,
        seed: int = SEED,
        steps: int | None = None,
        init: str = "",
        batches: str = "",
        extra_args: tuple[str, ...] = (),
        extra_mounts: tuple[Mount, ...] = (),
        batch_size: int | None = None,
    ) -> RunSpec:
        """The contender's run; the correctness checks pass their seed, steps and inputs;
        `batch_size` only where amendment 5.1 halved the model's batch."""
        p = ctx.protocol
        build = next(b for b in p.contender.builds if b.name == config.variant)
        ex = ctx.executor
        program = Mount("program", self.program.parent)
        data = Mount("data", self.data)
        # the one folder of the series it may write: its products records (amendment 4.3);
        # nanoGPT's trees and the other side's folders beside it are out of its reach
        products = Mount("products", ctx.work / "products", read_only=False)
        model = p.model(config.model)
        mounts = (data, products) if self.image_program else (program, data, products)
        values = {
            "program": self.image_program or f"{ex.where(program)}/{self.program.name}",
            "model": config.model,
            "precision": config.precision,
            "seed": str(seed),
            "steps": str(steps or p.timing.steps),
            "data": f"{ex.where(data)}/{model.dataset}",
            # amendment 4.3: the discarded run writes the products record, timed runs read it
            "products": f"{ex.where(products)}/{config.slug}.products",
            "init": init,
            "batches": batches,
            "device": ctx.device,
            "batch": str(batch_size or p.model(config.model).batch_size),
        }
        (ctx.work / "products").mkdir(parents=True, exist_ok=True)
        argv = fill_template(p.contender.command, values, "contender.command") + build.args
        if init or batches:
            argv += fill_template(p.contender.init_args, values, "contender.init_args")
        if batch_size:
            argv += fill_template(p.contender.batch_args, values, "contender.batch_args")
        argv += list(extra_args)
        return RunSpec(
            label=label,
            argv=tuple(argv),
            mounts=(*mounts, *extra_mounts),
            image=self.image,
            gpu=ctx.gpu,
            env=dict(ctx.env),
            side=self.name,
        )


class PyTorchSide(Side):
    """nanoGPT's train.py in one of PyTorch's four modes (§3 rule 2, D3).

    `workspace` holds nanoGPT's two trees (kit.sides.workspace): `shipped/`, train.py exactly as
    nanoGPT ships it, and `patched/`, with §4's patch; each runs as its own working folder.
    """

    name = PYTORCH

    def __init__(
        self, workspace: Path, python: str, image: str | None = None, *, allow_torch: bool = False
    ) -> None:
        self.workspace = workspace
        self.python = python
        self.image = image
        self.allow_torch = allow_torch

    def grammar(self, protocol: Protocol) -> Grammar:
        return protocol.pytorch

    def variants(self, protocol: Protocol, precision: str, smoke: bool) -> list[tuple[str, bool]]:
        modes = protocol.smoke.modes if smoke else protocol.pytorch.modes
        return [(m, True) for m in modes]

    def versions(
        self, ctx: RunContext, scratch: Path, recorded: Mapping[str, Any] | None = None
    ) -> dict:
        found = versions.pytorch_versions(
            ctx.executor, self.python, Mount("nanogpt", self.workspace), self.image, scratch
        )
        found["nanogpt_commit"] = ctx.protocol.nanogpt.commit
        found.update(versions.torch_pin(ctx.protocol, found, self.allow_torch))
        return found

    @staticmethod
    def tree(protocol: Protocol, mode: str) -> str:
        # §3 rule 2: the timing runs of the modes that need no patch use train.py as shipped
        return PATCHED if mode in protocol.pytorch.patched_modes else SHIPPED

    def spec(
        self,
        config: Config,
        label: str,
        ctx: RunContext,
        *,
        flags: dict[str, str] | None = None,
        tree: str | None = None,
        extra_mounts: tuple[Mount, ...] = (),
        batch_size: int | None = None,
    ) -> RunSpec:
        """A timing run of nanoGPT; the correctness checks pass their own flags and tree.

        `flags` replace or add nanoGPT's `--key=value` overrides (the last one given wins in
        nanoGPT's configurator, and the kit keeps one of each).
        """
        p = ctx.protocol
        model = p.model(config.model)
        ex = ctx.executor
        nanogpt = Mount("nanogpt", self.workspace)  # read-only: the code it measures
        out = Mount("out", ctx.work / "out", read_only=False)  # nanoGPT's out_dir, its only write
        out.host.mkdir(parents=True, exist_ok=True)
        mode = config.variant
        tree = tree or self.tree(p, mode)
        argv = [self.python, "-u", "train.py", model.config, *model.args]
        if ctx.smoke:
            argv += p.smoke.args
        argv += [
            f"--device={ctx.device}",
            f"--dtype={config.precision}",
            f"--compile={mode != 'eager'}",
            f"--max_iters={p.timing.steps}",
            # D3: evaluation off, but nanoGPT keeps its single evaluation batch at step 0
            "--eval_iters=1",
            f"--eval_interval={p.timing.steps * 10}",
            f"--log_interval={p.timing.log_interval}",
            "--always_save_checkpoint=False",
            f"--out_dir={ex.where(out)}/{config.slug}",
        ]
        if tree == PATCHED and mode != "eager":
            argv.append(f"--compile_mode={mode}")
        if batch_size:  # amendment 5.1: the batch halved for both sides
            flags = {"batch_size": str(batch_size), **(flags or {})}
        if flags:
            keys = {f"--{k}" for k in flags}
            argv = [a for a in argv if a.split("=", 1)[0] not in keys]
            argv += [f"--{k}={v}" for k, v in flags.items()]
        return RunSpec(
            label=label,
            argv=tuple(argv),
            mounts=(nanogpt, out, *extra_mounts),
            workdir=f"{ex.where(nanogpt)}/{tree}",
            image=self.image,
            gpu=ctx.gpu,
            env={**ctx.env, "PYTHONUNBUFFERED": "1"},
            side=self.name,
        )
