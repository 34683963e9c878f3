"""`micakit correctness`: the protocol's correctness.sh (§7) as one command.

Parse, make the options whole (as `kit.cli.assemble` does for a series), run the check
(`kit.correctness.check_run`), render `correctness.md` (`kit.correctness.check_md`), print the
verdict. Exit codes as `micakit
series`: 0 the
check ran (passed or not: the verdict says), 2 bad input, 3 a run failed (finished runs are kept,
`--resume` goes on), 130 interrupted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kit.cli import options
from kit.cli.assemble import build_sides, executor
from kit.cli.declared import option, takes
from kit.cli.options import say
from kit.correctness import check_md, check_plan, check_run, checks
from kit.errors import ExitCode, Interrupted, UserError
from kit.protocol.load import Protocol, load
from kit.results import links, store
from kit.results.lock import LOCK
from kit.results.planned import CONTENDER, SIDES
from kit.results.run_options import CheckOptions
from kit.results.store import ResultsDir

# -- a new check's options, made absolute and complete, as its manifest keeps them ---------------


def parse_seeds(text: str) -> tuple[int, ...]:
    """ "1337-1341" or "1337,1338": rising and distinct, or a UserError naming the offender."""
    fix = "give the seeds rising and once each, e.g. --seeds 1337-1341 or --seeds 1337,1338"
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        try:
            span = range(int(lo), int(hi) + 1) if dash else [int(part)]
        except ValueError:
            raise UserError(f"--seeds {text!r}: {part!r} is not a seed or a range", fix) from None
        if dash and not span:
            raise UserError(f"--seeds {text!r}: the range {part} runs backwards", fix)
        for seed in span:
            if seed in seeds:
                raise UserError(f"--seeds {text!r}: seed {seed} is given twice", fix)
            if seeds and seed < seeds[-1]:
                raise UserError(f"--seeds {text!r}: seed {seed} comes after {seeds[-1]}", fix)
            seeds.append(seed)
    return tuple(seeds)


def _path(value: Path | str | None) -> str | None:
    return str(Path(value).resolve()) if value else None


@dataclass(frozen=True)
class CheckArgs:
    """`micakit correctness` as click parsed it: one field for each of its options, declared
    once with its option's help (kit.cli.declared builds the click options from them), in the
    order `--help` lists them. `resolve` reads it by attribute, which mypy checks."""

    method: str | None = option(
        help="A: five seeds a side, whole schedule; B: one shared start, 200 steps.",
        type=click.Choice(["A", "B"], case_sensitive=False),
    )
    model: str | None = option(
        help="shakespeare-char, gpt2-small or gpt2-medium.",
        shell_complete=options.complete_models,
    )
    precision: str | None = option(
        help="Method A: float32, bfloat16, float16 (B runs float32).",
        shell_complete=options.complete_precisions,
    )
    seeds: str | None = option(help="Method A's seeds, rising: 1337-1341 (default) or 1337,1338.")
    products: Path | None = option(
        help="The results directory of this card's series (amendments 4.3, 7.4)."
    )
    card: str | None = option(help="The card's name (default: the one NVML sees, or cpu).")
    out: Path | None = option(help="A new results directory.")
    resume: Path | None = option(help="Resume this check.")
    contender: Path | None = option(help="The contender program.")
    nanogpt: Path | None = option(help="A nanoGPT checkout to use.")
    input: Path | None = option(help="Your copy of tiny Shakespeare.")
    data_dir: Path | None = option(help="Prepared datasets (default: in the results directory).")
    tiktoken_files: Path | None = option(
        help="GPT-2's vocab.bpe and encoder.json, for offline machines."
    )
    protocol_path: Path | None = option("--protocol", help="Protocol file.")
    device: str | None = option(help="Default: cuda.", type=click.Choice(["cuda", "cpu"]))
    smoke: bool = option(help="Scaled down ([smoke] model, [correctness] smoke_*).")
    executor: str | None = option(
        help="Default: docker where an engine answers, else local.",
        type=click.Choice(["local", "docker"]),
    )
    docker_host: str | None = option(help="Drive another machine's engine, e.g. ssh://user@host.")
    pytorch_image: str | None = option(help="PyTorch's measured image (default: this kit's tag).")
    mica_image: str | None = option(
        help="The contender's measured image (default: this kit's tag)."
    )


# How `micakit correctness`' parameters and `CheckOptions`' fields meet; every other parameter
# is the field of the same name. The parameters that are no option of the check:
CLI_ONLY = {"resume": "names a directory whose manifest.json holds the options"}
# a parameter whose field has another name: the parameter's name -> the field's
RENAMED = {"protocol_path": "protocol"}
# the fields no parameter gives
DERIVED = {
    "models": "the one --model",
    "card_info": "NVML's account of the card (--card names it on a CPU)",
    "sides": "always both",
    "batch_size": "from the --products series' adjustments (amendment 5.1)",
    "products_sha256": "the products record's, once copied in",
}


def resolve(args: CheckArgs) -> CheckOptions:
    p = load(args.protocol_path)
    method = (args.method or "").upper()
    if method not in ("A", "B"):
        raise UserError(
            "name the method: --method A or --method B",
            "§7 A: five seeds a side; §7 B: one shared start",
        )
    smoke = args.smoke
    model = args.model or (next(iter(p.models)) if smoke else None)
    if not model:
        raise UserError("name the model: --model", f"one of {', '.join(p.models)}")
    p.model(model)
    precision = p.check_precision(args.precision or "float32")
    if method == "B" and precision != "float32":
        raise UserError(
            f"method B runs in float32, not {precision}",
            "§7 B: plain float32 without TF32; its verdict holds for every precision",
        )
    if method == "B" and args.seeds:
        raise UserError("method B takes no --seeds: both sides start from one shared start")
    if method == "B":
        seeds: tuple[int, ...] = (p.correctness.shared_start_seed,)
    else:
        seeds = parse_seeds(args.seeds) if args.seeds else tuple(p.correctness.seeds)
    contender = args.contender
    if not contender or not Path(contender).is_file() or not os.access(contender, os.X_OK):
        raise UserError(
            f"the contender program {contender or '(none given)'} is not an executable file",
            "name it with --contender PATH (chmod +x it)",
        )
    device = args.device or (p.smoke.device if smoke else "cuda")
    card_info = _card_info(device, args.card)
    if not args.out:
        raise UserError("a new check needs --out DIR", "e.g. --out results/check-m1-a")
    o = CheckOptions(
        protocol=str(p.path),
        out=str(Path(args.out).resolve()),
        method=method,
        model=model,
        models=(model,),
        precision=precision,
        seeds=seeds,
        card=card_info["name"],
        card_info=card_info,
        device=device,
        smoke=smoke,
        sides=SIDES,
        contender=_path(contender),
        nanogpt=_path(args.nanogpt),
        input=_path(args.input),
        data_dir=str(Path(args.data_dir or Path(args.out) / "work" / "data").resolve()),
        tiktoken_files=_path(args.tiktoken_files),
        executor=args.executor,
        docker_host=args.docker_host,
        pytorch_image=args.pytorch_image,
        mica_image=args.mica_image,
    )
    products = _products(p, o, args.products)
    return dataclasses.replace(o, products=products, batch_size=_halved_batch(products, model))


def _halved_batch(products: str | None, model: str) -> int | None:
    """Amendment 5.1: where the card's series halved the model's batch, its check does too."""
    path = Path(products or "") / store.ADJUSTMENTS
    if not products or not path.is_file():
        return None
    adjusted = store.ResultsDir(Path(products)).read_json(store.ADJUSTMENTS).get(model)
    return int(adjusted["batch_size"]) if adjusted else None


def _card_info(device: str, card: str | None) -> dict[str, Any]:
    """The card the check runs on: NVML's name for a GPU; "cpu" (or --card's name) on a CPU."""
    if device == "cpu":
        return {"name": card or "cpu"}
    from kit.telemetry import nvml

    with nvml.open_card(0) as opened:
        info = opened.info().to_dict()
    if card and card != info["name"]:
        raise UserError(
            f"--card {card!r}, but the card NVML sees is {info['name']!r}",
            "leave --card out: a check belongs to the card it ran on (amendment 7.3)",
        )
    return info


def _products(p: Protocol, o: CheckOptions, products: Path | None) -> str | None:
    """Amendments 4.3 and 7.4: the contender reads the products record its card's series uses."""
    if not products:
        if o.smoke:
            return None  # a smoke check's contender chooses its own, in its first run
        raise UserError(
            "a check needs --products DIR, the results directory of this card's series",
            "§7's check runs with the products record its series uses (amendments 4.3, 7.4)",
        )
    root = checks.check_products_dir(Path(products).resolve(), o.card)  # kept in the manifest
    want = ResultsDir(root).versions().side(CONTENDER).get("program_sha256")
    if want and want != store.sha256_file(Path(o.contender or "")):
        raise UserError(
            f"--contender {o.contender} is not the program the series {root} measured "
            f"(SHA-256 {want[:12]}…)",
            "name the program that series ran: a check runs the build it compares (7.1)",
        )
    config = check_plan.make_spec(p, o).config(CONTENDER)
    if not (root / "work" / "products" / f"{config.slug}.products").is_file():
        raise UserError(
            f"{root} holds no products record for {config.id}",
            "name the series that measured this model and precision on this card",
        )
    return str(root)


def assemble(args: CheckArgs, argv: list[str]) -> check_run.CheckRunner:
    """A new check (with --out) or a resumed one (with --resume), ready to run."""
    resume = args.resume
    if resume and args.out:
        raise UserError(
            "give either --out (a new check) or --resume (an existing one), not both",
            f"`micakit correctness --resume {resume}` alone resumes it (its options are in its "
            "manifest.json); --out alone starts a new check",
        )
    if resume:
        rd = ResultsDir.open(Path(resume).resolve()).lock("a check")  # absolute, as --out is
        links.refuse(rd.root)  # nothing is written through a link (D6)
        if rd.manifest().kind != check_plan.KIND:
            raise UserError(
                f"{resume} is not a correctness check's results directory",
                f"a series resumes with `micakit series --resume {resume}`",
            )
        o = CheckOptions.from_json(rd.manifest().options)
        p = load(args.protocol_path or rd.root / store.PROTOCOL)
        if o.device == "cuda":  # the card it started on, checked again (versions, rule 4)
            o = dataclasses.replace(o, card_info=_card_info("cuda", o.card))
    else:
        o = resolve(args)
        p = load(Path(o.protocol))
        root = Path(o.out)
        unstarted = (root / store.STARTING).exists() and not (root / store.MANIFEST).exists()
        if root.is_dir() and any(p.name != LOCK for p in root.iterdir()) and not unstarted:
            raise UserError(
                f"the results directory {root} already exists; a check never overwrites one",
                f"resume it with `micakit correctness --resume {root}`, or name a new --out",
            )
        rd = ResultsDir.create(root, "a check")
    ex = executor(o.executor, o.docker_host)
    # the sides' caches of Inductor and the driver (a volume or a folder each), kept across
    # resumes
    digest = hashlib.sha256(str(rd.root.resolve()).encode()).hexdigest()[:10]
    ex.use_series(f"{rd.root.name}-{digest}")
    sides = build_sides(p, o.inputs(), rd.root / "work", ex)
    runner = check_run.CheckRunner(rd, p, o, {s.name: s for s in sides}, ex, say)
    if resume:
        runner.check_resume()
    else:
        runner.write_start(argv)
    return runner


# -- the command ----------------------------------------------------------------------------


@click.command()
@takes(CheckArgs)
@options.verbosity
def correctness(args: CheckArgs) -> None:
    """Run §7's correctness check (method A or B) for one model and precision on this card.

    \b
    Examples:
      micakit correctness --method A --model shakespeare-char --precision bfloat16 \\
          --products results/4090 --contender P --out results/check-m1-bf16-A
      micakit correctness --method B --model gpt2-medium --products results/L4 \\
          --contender P --out results/check-m2b-B-L4
      micakit correctness --resume results/check-m1-bf16-A
    """
    run(args)


def run(args: CheckArgs) -> None:
    """The check `args` names, run to its end (or resumed), its correctness.md written and its
    verdict said."""
    ctx = click.get_current_context()
    # first, so that a stop or a full disk at any moment of start-up says how to go on
    ctx.meta["resume_hint"] = args.resume or args.out
    runner = assemble(args, sys.argv)
    try:
        judged = runner.run()
    except (KeyboardInterrupt, Interrupted) as e:
        click.echo(
            f"micakit: interrupted during {e or 'the check'}; finished runs are kept.\n"
            f"  resume with: micakit correctness --resume {runner.rd.root}",
            err=True,
        )
        ctx.exit(int(ExitCode.INTERRUPTED))
    runner.executor.finish()  # every run done: the sides' caches go
    said_of = check_md.Described(
        runner.spec, runner.o, runner.p, judged.record, runner.shared_outputs()
    )
    lines = check_md.markdown(said_of, judged.result)
    runner.rd.write_text(check_md.CORRECTNESS_MD, "\n".join(lines))
    store.publish_modes(runner.rd.root)  # whatever the umask, the results are readable (D6)
    rec = judged.record
    said = {True: "passed", False: f"failed ({rec.reason})", None: "read, not judged"}[rec.passed]
    click.echo(f"method {rec.method}, {rec.model}, {rec.precision}, {rec.card}: {said}")
    if rec.sides_isolated is False:
        click.echo(f"  {checks.NOT_ISOLATED}: this check gates no verdict")
    click.echo(str(runner.rd.root / check_md.CORRECTNESS_MD))
