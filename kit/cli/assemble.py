"""From the command line's options to a ready series: protocol, sides, executor, directory.

A new series resolves its options once and saves them in its manifest; a resumed series takes
them from there, so `series --resume DIR` needs nothing else.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from kit.cli import progress, side_images
from kit.cli.series_args import SeriesArgs
from kit.engine.conditions import CardConditions, MachineConditions
from kit.engine.series import Series, SeriesSpec
from kit.errors import UserError
from kit.executors.base import Executor
from kit.executors.local import LocalExecutor
from kit.protocol.load import Protocol, load
from kit.results import links, store
from kit.results.planned import CONTENDER, PYTORCH
from kit.results.run_options import SeriesOptions, SideInputs
from kit.results.store import ResultsDir
from kit.sides import workspace
from kit.sides.side import ContenderSide, PyTorchSide, RunContext, Side


def executor(name: str | None, host: str | None = None) -> Executor:
    """The executor asked for; by default Docker wherever an engine answers, else local."""
    if name == "local":
        return LocalExecutor()
    # lazy: the Docker SDK loads only for a series that may use it (start-up speed)
    from kit.executors.docker.connection import connect
    from kit.executors.docker.executor import DockerExecutor

    if name == "docker" or host:
        return DockerExecutor(connect(host), host=host)
    try:
        return DockerExecutor(connect(None))
    except UserError:
        return LocalExecutor()


def _card(
    o: SeriesOptions, p: Protocol, ex: Executor
) -> tuple[dict, CardConditions | MachineConditions | None, str | None]:
    """The card's record, its conditions around every run (§5), and the Docker device request;
    on a CPU, the machine's conditions instead."""
    if o.device == "cpu":
        if o.docker_host and not o.docker_host.startswith("unix://"):
            return {"name": "cpu"}, None, None  # the runs run on another machine, unread here
        machine = MachineConditions(p.conditions, o.idle_timeout_s, o.refuse_busy, ex.running)
        return {"name": "cpu"}, machine, None
    from kit.telemetry import nvml  # lazy: NVML loads only where there is a card

    card = nvml.open_card(o.gpu or 0)
    info = card.info().to_dict()
    conditions = CardConditions(card, o.idle_timeout_s, o.refuse_busy)
    # the container sees the same card the host's NVML reads
    return info, conditions, str(info["uuid"])


def resolve(args: SeriesArgs) -> SeriesOptions:
    """The options of a new series, made absolute and complete, as the manifest keeps them."""
    p = load(args.protocol_path)
    smoke = args.smoke
    device = args.device or (p.smoke.device if smoke else "cuda")
    models = list(args.models or ([next(iter(p.models))] if smoke else p.models))
    precisions = list(args.precisions or (p.smoke.precisions if smoke else p.precisions.names))
    _refuse_early(p, models, precisions, device == "cpu" and not smoke and not args.full_cpu)
    sides = []
    if not args.no_pytorch:
        sides.append(PYTORCH)
    contender = None
    if args.contender:
        contender = Path(args.contender).resolve()
        if not contender.is_file() or not os.access(contender, os.X_OK):
            raise UserError(
                f"the contender program {contender} is not an executable file",
                "name the compiled training program with --contender PATH (chmod +x it)",
            )
        sides.append(CONTENDER)
    if not sides:
        raise UserError(
            "nothing to run: --no-pytorch was given and no --contender",
            "name the contender program with --contender PATH",
        )
    out = args.out
    if not out:
        raise UserError("a new series needs --out DIR", "e.g. --out results/my-series")
    return SeriesOptions(
        protocol=str(p.path.resolve()),
        out=str(Path(out).resolve()),
        smoke=smoke,
        device=device,
        models=tuple(models),
        precisions=tuple(precisions),
        sides=tuple(sides),
        contender=str(contender) if contender else None,
        nanogpt=_absolute(args.nanogpt),
        # the series' own folder by default: every executor can mount it, the runner image's
        # included, and the data every run read stays with the results
        data_dir=str(Path(args.data_dir or Path(out) / "work" / "data").resolve()),
        input=_absolute(args.input),
        tiktoken_files=_absolute(args.tiktoken_files),
        # the A/A rounds' configurations as said: `primary`, `all` or ids, comma-separated or not
        aa=tuple(w.strip() for said in args.aa for w in said.split(",") if w.strip()),
        executor=args.executor,
        env=_env_pairs(args.env),
        docker_host=args.docker_host,
        pytorch_image=args.pytorch_image,
        mica_image=args.mica_image,
        gpu=args.gpu,
        refuse_busy=args.refuse_busy,
        # 0 waits not at all: it is a value, not a missing one
        idle_timeout_s=60.0 if args.idle_timeout is None else float(args.idle_timeout),
        # rule 9: a torch other than the protocol's pin runs only when asked, as preparation
        allow_torch=args.allow_torch,
        full_cpu=bool(args.full_cpu) and device == "cpu" and not smoke,
    )


def _refuse_early(p: Protocol, models: list[str], precisions: list[str], full_on_cpu: bool) -> None:
    """What is refused before the results directory is made, so that it leaves nothing behind:
    a model or precision the protocol does not name, the full-size models on a CPU unasked."""
    for model in models:
        p.model(model)
    for precision in precisions:
        p.check_precision(precision)
    if full_on_cpu:
        raise UserError(
            "--device cpu without --smoke would prepare and train the protocol's full-size "
            "models on the CPU (hours to days)",
            "add --smoke for the scaled-down models that train in seconds "
            "(`micakit series --smoke --device cpu --out DIR`), or --full-cpu to run the "
            "full-size models on the CPU on purpose",
        )


def _env_pairs(items: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(
                f"--env {item!r} is not KEY=VALUE", "e.g. --env CUDA_MODULE_LOADING=LAZY"
            )
        env[key] = value
    return env


def series_id(out: Path) -> str:
    """A stable name for the series' cache volume and its containers' `micakit.series` label:
    the same on every resume."""
    import hashlib

    digest = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:10]
    return f"{out.name}-{digest}"


def _absolute(path: Path | str | None) -> str | None:
    return str(Path(path).resolve()) if path else None


def build_sides(
    p: Protocol,
    o: SideInputs,
    work: Path,
    ex: Executor,
    say: Callable[[str], None] | None = None,
) -> list[Side]:
    """The sides of this series. In containers each side runs from its measured image (§8);
    nanoGPT's trees and the data are the series' own copies, mounted, in either executor."""

    sides: list[Side] = []
    images = ex.images  # each side from its measured image (§8), where the executor has them
    if PYTORCH in o.sides:
        ws = workspace.prepare(p, o, work / "nanogpt")
        if images:
            image = side_images.image(images, "pytorch", p, o, say)
            side_images.pytorch_in_image(images, image, "python", p, o)
            sides.append(PyTorchSide(ws, "python", image, allow_torch=o.allow_torch))
        else:
            sides.append(PyTorchSide(ws, o.python or _python(), allow_torch=o.allow_torch))
    if CONTENDER in o.sides:
        data = workspace.datasets(p, o)
        if not o.contender:
            raise UserError("the contender's side runs with --contender PATH, and none was named")
        program = Path(o.contender)
        if images:
            image = side_images.image(images, "mica", p, o, say)
            inside = side_images.contender_in_image(images, image, program, p, o)
            sides.append(ContenderSide(program, data, image=image, image_program=inside))
        else:
            sides.append(ContenderSide(program, data))
    return sides


def _own_images(e: UserError, rd: ResultsDir) -> UserError:
    """A resumed series runs only the images it started with (rule 4): where one is missing or
    wrong, the fix names those, by the ids versions.json records, not a new build."""
    recorded = rd.versions().images if (rd.root / store.VERSIONS).exists() else None
    back = [
        f"`docker tag {i['image_id']} {i['image']}`"
        for name, i in sorted((recorded or {}).items())
        if name != "runner" and i.get("image_id") and i.get("image")
    ]
    if not back:
        return e
    return UserError(
        e.message,
        f"this series started with other images: get them back ({', '.join(back)}, while "
        "the engine holds them; else `docker pull` by the digests in versions.json), since a "
        "new build is refused at resume; or start a new series in a new directory",
    )


def _python() -> str:
    import sys

    return sys.executable


def series(args: SeriesArgs, argv: list[str], console: Console) -> tuple[Series, Any]:
    """A new series (with --out) or a resumed one (with --resume), ready to run."""
    resume = args.resume
    if resume and args.out:
        raise UserError(
            "give either --out (a new series) or --resume (an existing one), not both",
            f"`micakit series --resume {resume}` alone resumes it (its options are in its "
            "manifest.json); --out alone starts a new series",
        )
    if resume:
        # one writer per results directory, from before anything in it is read or written;
        # absolute, as --out is, so that every path a run is handed is (amendments 2 and 4.3)
        rd = ResultsDir.open(Path(resume).resolve()).lock()
        links.refuse(rd.root)  # nothing is written through a link (D6)
        o = SeriesOptions.from_json(rd.manifest().options)
        # the protocol file: the one named now, else the series' own copy; hashes must agree
        p = load(args.protocol_path or rd.root / store.PROTOCOL)
    else:
        o = resolve(args)
        p = load(Path(o.protocol))
    ex = executor(o.executor, o.docker_host)
    ex.use_series(series_id(Path(o.out)))
    card_info, conditions, gpu = _card(o, p, ex)
    if isinstance(conditions, MachineConditions):  # a wait for the CPUs, said as it begins
        conditions.said = lambda text: console.print(text, markup=False, highlight=False)
    fresh = not resume and not Path(o.out).exists()
    if not resume:
        rd = ResultsDir.create(Path(o.out))
    try:
        return _ready(args, argv, o, p, ex, rd, (card_info, conditions, gpu), console)
    except UserError:
        if fresh:
            _undo_start(rd)
        raise


def _undo_start(rd: ResultsDir) -> None:
    """A new series refused before its first run (no network, an image missing) measured
    nothing: the folder it made goes, so the same command starts it again on a clean slate."""
    if (rd.root / store.MANIFEST).exists():
        return  # its start was written: the series exists, `--resume` goes on
    rd.writer.release()
    shutil.rmtree(rd.root, ignore_errors=True)


def _ready(
    args: SeriesArgs,
    argv: list[str],
    o: SeriesOptions,
    p: Protocol,
    ex: Executor,
    rd: ResultsDir,
    card: tuple[dict, CardConditions | MachineConditions | None, str | None],
    console: Console,
) -> tuple[Series, Any]:
    """The series' sides built and its start written (or, resumed, checked)."""
    resume = args.resume
    card_info, conditions, gpu = card
    cc = card_info.get("compute_capability")
    spec = SeriesSpec(
        models=o.models,
        precisions=o.precisions,
        device=o.device,
        card=card_info["name"],
        compute_capability=float(f"{cc[0]}.{cc[1]}") if cc else None,
        smoke=o.smoke,
        sides=o.sides,
        aa=o.aa,
        extra={"contender": o.contender or "none given"},
    )
    work = rd.root / "work"
    ctx = RunContext(p, ex, o.device, gpu, work, smoke=o.smoke, env=dict(o.env))
    hooks = progress.make(console)
    try:
        sides = build_sides(p, o.inputs(), work, ex, hooks.message)
    except side_images.ImageUnfit as e:
        raise _own_images(e, rd) if resume else e from None
    s = Series(
        rd,
        p,
        spec,
        sides,
        ex,
        ctx,
        hooks,
        conditions,
        card_info,
    )
    if resume:
        s.check_resume()
    else:
        s.write_start(argv, o.to_json())
    return s, hooks
