"""`micakit correctness` (§7, D5): methods A and B, run as a series runs, judged from raw logs.

The protocol's correctness.sh as one command. A check is a plan of runs for the engine
(`kit.engine.engine`), which starts, resumes, runs and records it as it does a series: every run
is a fresh process started through the executor and read by the outside clock, and its record is
appended (fsynced) only once it ended, so a check stopped at any point resumes with every
finished run kept. Method B's shared start (nanoGPT's own initialization as `ckpt.pt`, its
safetensors export, one batch order) is made once, by run 0, in the PyTorch side's environment.
When every run has finished, the curves are parsed from the stamped logs and judged
(`kit.correctness.check_verdict`); the verdict is appended to `checks.jsonl` beside its plot and
tables (the command renders `correctness.md`).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kit.correctness import check_verdict
from kit.correctness.check_plan import (
    BATCHES,
    CKPT,
    INIT,
    KIND,
    SHARED_DIR,
    SHARED_START,
    CheckRun,
    make_spec,
    plan_runs,
)
from kit.correctness.nanogpt_config import meta_vocab, nanogpt_config
from kit.engine.engine import Engine, Judged, Kind
from kit.errors import UserError
from kit.executors import programs
from kit.executors.base import Executor, Mount, RunOutcome, RunSpec
from kit.measure import timing
from kit.measure.stamped import read_stamped
from kit.protocol.load import Grammar, Protocol
from kit.results import store
from kit.results.planned import CONTENDER, PYTORCH, SIDES
from kit.results.records import RunRecord
from kit.results.run_options import CheckOptions
from kit.results.store import ResultsDir
from kit.sides.side import ContenderSide, PyTorchSide, RunContext, fill_template
from kit.sides.workspace import PATCHED
from kit.status import RunStatus

# The shared start is made by the kit's own shared_start.py, copied beside what it makes (D6:
# every script is published) and run where the PyTorch side runs: its torch, its model.py.
MAKER = "maker"
MAKER_FILES = (  # the maker (kit/correctness/make_start.py) and the little it imports
    "errors.py",
    "correctness/shared_start.py",
    "correctness/make_start.py",
)


class CheckRunner(Kind[CheckRun]):
    """One check bound to its results directory, protocol, sides and executor."""

    noun, command, manifest_kind = "check", "correctness", KIND

    def __init__(
        self,
        rd: ResultsDir,
        protocol: Protocol,
        options: CheckOptions,
        sides: dict[str, Any],
        executor: Executor,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.rd, self.p, self.o, self.executor, self.say = rd, protocol, options, executor, say
        self.spec = make_spec(protocol, options)
        self.plan = plan_runs(self.spec)
        self.pytorch: PyTorchSide = sides[PYTORCH]
        self.contender: ContenderSide = sides[CONTENDER]
        self.work = rd.root / "work"
        gpu = str(options.card_info.get("uuid")) if options.device == "cuda" else None
        self.ctx = RunContext(protocol, executor, options.device, gpu, self.work, options.smoke)
        self.shared = Mount("shared_start", rd.root / SHARED_DIR)
        self.engine = Engine(rd, protocol, executor, self.plan, self)

    def write_start(self, argv: list[str]) -> None:
        """The products record, then the protocol file, plan and manifest (a check without a
        manifest never started, and the same command starts it again)."""
        if self.o.products:
            slug = self.spec.config(CONTENDER).slug
            src = Path(self.o.products) / "work" / "products" / f"{slug}.products"
            dest = self.work / "products" / src.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            self.o = dataclasses.replace(self.o, products_sha256=store.sha256_file(dest))
        manifest = {"check": dataclasses.asdict(self.spec), "options": self.o.to_json()}
        self.engine.write_start(argv, {}, manifest)

    def check_resume(self) -> None:
        self.engine.check_resume()

    def run(self) -> check_verdict.Verdict:
        """Every planned run without a finished record, in order; then the verdict."""
        self.engine.run()
        grammars = {side: self._grammar(side) for side in SIDES}
        v = check_verdict.evaluate(self.rd, self.p, self.spec, self.plan, grammars)
        return check_verdict.keep(self.rd, self.p, self.spec, v)

    # -- what the engine asks of a check ----------------------------------------------------------

    def planned(self, done: set[int]) -> None:
        self.say(f"{len(self.plan)} runs planned, {len(done)} already done")

    def prepare(self) -> None:
        sides = {s.name: s for s in (self.pytorch, self.contender)}
        self.engine.record_versions(dict(self.o.card_info), sides, self.ctx)

    def started(self, run: CheckRun, position: int) -> None:
        self.say(f"run {run.run_id + 1}/{len(self.plan)}: {self._describe(run)}")

    def _describe(self, run: CheckRun) -> str:
        if run.kind == SHARED_START:
            return "the shared start (nanoGPT's initialization, safetensors, batch order)"
        return f"{run.side} seed {run.seed}, {self.spec.steps} steps"

    def slug(self, run: CheckRun) -> str:
        return run.slug

    def title(self, run: CheckRun) -> str:
        return f"run {run.run_id} ({self._describe(run)})"

    def head(self, run: CheckRun) -> dict[str, Any]:
        config = self.spec.config(run.side).id
        return {"kind": run.kind, "side": run.side, "seed": run.seed, "config": config}

    def done(self, record: RunRecord) -> bool:
        return record.status == RunStatus.OK

    def _scratch(self, run: CheckRun, log_dir: Path) -> Path:
        """Method B: nanoGPT's out_dir for one run, a copy of ckpt.pt (GBs for M2b)."""
        return self.work / "method_b" / f"{run.run_id:04d}-{log_dir.name}"

    @contextmanager
    def around(self, run: CheckRun, log_dir: Path) -> Iterator[None]:
        try:
            yield
        finally:
            shutil.rmtree(self._scratch(run, log_dir), ignore_errors=True)

    def run_spec(self, run: CheckRun, log_dir: Path) -> RunSpec:
        return self._spec(run, self._scratch(run, log_dir))

    def judge(self, run: CheckRun, spec: RunSpec, outcome: RunOutcome, log_dir: Path) -> Judged:
        status, reason = self._judge(run, outcome)
        if run.kind != SHARED_START or status != timing.OK:
            return Judged(status, reason)
        self._export_here()
        return Judged(status, reason, outputs=self.engine.hashes(self.shared.host, MAKER))

    def _grammar(self, side: str) -> Grammar:
        return self.pytorch.grammar(self.p) if side == PYTORCH else self.p.contender

    def _spec(self, run: CheckRun, scratch: Path) -> RunSpec:
        s, ex, c = self.spec, self.executor, self.p.correctness
        label = f"check run {run.run_id} {run.slug}"
        if run.kind == SHARED_START:
            return self._shared_start_spec(label)
        shared = ex.where(self.shared)
        if s.method == "B":
            self._check_shared_start()
        if run.side == CONTENDER:
            kw: dict[str, Any] = {"seed": run.seed, "steps": s.steps, "batch_size": s.batch_size}
            if s.method == "A":
                values = {"eval_interval": str(s.eval_interval), "eval_iters": str(s.eval_iters)}
                args = fill_template(c.eval_args, values, "correctness.eval_args")
                kw["extra_args"] = tuple(args)
            else:  # §7 B: the shared start through files, every step's loss
                kw |= {
                    "init": f"{shared}/{INIT}",
                    "batches": f"{shared}/{BATCHES}",
                    "extra_args": tuple(c.method_b_args),
                    "extra_mounts": (self.shared,),
                }
            return self.contender.spec(s.config(CONTENDER), label, self.ctx, **kw)
        # §7: nanoGPT through the patched tree: its seed variable; for B its batch-order switch
        flags = {"max_iters": str(s.steps), "seed": str(run.seed)}
        mounts: tuple[Mount, ...] = ()
        if s.method == "A":
            flags |= {"eval_interval": str(s.eval_interval), "eval_iters": str(s.eval_iters)}
        else:
            scratch.mkdir(parents=True)
            shutil.copyfile(self.shared.host / CKPT, scratch / CKPT)  # a fresh out_dir a run
            own = Mount("scratch", scratch, read_only=False)  # its out_dir, its only write
            out_dir = ex.where(own)
            # §7 B: nanoGPT's resume path, dropout 0, plain float32 without TF32, every step
            flags |= {
                "init_from": "resume",
                "out_dir": out_dir,
                "batch_order": f"{shared}/{BATCHES}",
                "allow_tf32": "False",
                "dropout": "0.0",
                "dtype": "float32",
                "log_interval": "1",
                "compile": "False",
                "eval_iters": "1",
                "eval_interval": str(10 * s.steps),
            }
            mounts = (self.shared, own)
        return self.pytorch.spec(
            s.config(PYTORCH),
            label,
            self.ctx,
            flags=flags,
            tree=PATCHED,
            extra_mounts=mounts,
            batch_size=s.batch_size,
        )

    def _shared_start_spec(self, label: str) -> RunSpec:
        """§7 B: made once by nanoGPT's own initialization, where the PyTorch side runs."""
        ex, s, model = self.executor, self.spec, self.p.model(self.spec.model)
        tree = self.pytorch.workspace / PATCHED
        argv = [model.config, *model.args, *(self.p.smoke.args if s.smoke else [])]
        halved = [f"--batch_size={s.batch_size}"] if s.batch_size else []  # amendment 5.1
        cfg = nanogpt_config(tree, [*argv, *halved, "--dropout=0.0"])
        meta = tree / "data" / model.dataset / "meta.pkl"
        # train.py: the vocabulary of meta.pkl where the dataset has one, else GPT-2's padded
        vocab = meta_vocab(meta) if meta.is_file() else 50304
        model_args = {k: cfg[k] for k in ("n_layer", "n_head", "n_embd", "block_size", "bias")}
        model_args |= {"vocab_size": vocab, "dropout": 0.0}
        programs.ship(MAKER_FILES, self.shared.host / MAKER)
        nanogpt = Mount("nanogpt", self.pytorch.workspace)
        where, shared = ex.where(nanogpt), ex.where(self.shared)
        request = {
            "out": shared,
            "model_args": model_args,
            "seed": self.p.correctness.shared_start_seed,
            "nanogpt": f"{where}/{PATCHED}",
            "train_bin": f"{where}/{PATCHED}/data/{model.dataset}/train.bin",
            "weight_decay": cfg["weight_decay"],
            "learning_rate": cfg["learning_rate"],
            "betas": [cfg["beta1"], cfg["beta2"]],
            "device_type": "cuda" if "cuda" in s.device else "cpu",
            "batch_size": cfg["batch_size"],
            "gradient_accumulation_steps": cfg["gradient_accumulation_steps"],
            "steps": s.steps,
            "config": {k: v for k, v in cfg.items() if isinstance(v, int | float | bool | str)},
        }
        store.write_json(self.shared.host / "request.json", request)
        return RunSpec(
            label=label,
            argv=(
                self.pytorch.python,
                "-m",
                "kit.correctness.make_start",
                f"{shared}/request.json",
            ),
            env=programs.env(f"{shared}/{MAKER}"),
            mounts=(nanogpt, dataclasses.replace(self.shared, read_only=False)),
            image=self.pytorch.image,
            side=self.pytorch.name,
        )

    def _export_here(self) -> None:
        """§7 B: the contender's safetensors copy of the initial weights, made by the kit itself
        where the PyTorch side's measured image has no safetensors (§8 keeps that image to what
        `pip install torch numpy` brings)."""
        if (self.shared.host / INIT).exists():
            return
        try:
            # lazy: shared_start imports torch, which only a check that makes its start needs
            from kit.correctness import shared_start

            shared_start.export_safetensors(self.shared.host / CKPT, self.shared.host / INIT)
        except ModuleNotFoundError as e:
            raise UserError(
                f"method B's safetensors export needs {e.name} where the kit runs",
                "install the kit with its training extras: pip install 'micakit[train]'",
            ) from None

    def shared_outputs(self) -> dict[str, str]:
        """The shared start's files and SHA-256, as run 0 recorded them."""
        return check_verdict.shared_outputs(self.rd)

    def _check_shared_start(self) -> None:
        """What the sides read is what run 0 made: this model's shapes, the same bytes."""
        from kit.correctness import shared_start  # lazy: it imports torch

        request = self.rd.read_json(f"{SHARED_DIR}/request.json")
        shared_start.check_init_shapes(self.shared.host / INIT, request["model_args"])
        shared_start.load_batch_order(self.shared.host / BATCHES, request["batch_size"])
        for rel, digest in self.shared_outputs().items():
            path = self.rd.root / rel
            if not path.is_file() or store.sha256_file(path) != digest:
                raise UserError(
                    f"{rel} changed since run 0 made it: both sides must read one shared start",
                    f"start the check again in a new directory (--out), or restore {rel}",
                )

    def _judge(self, run: CheckRun, outcome: RunOutcome) -> tuple[str, str]:
        """A run's status from its exit code and stamped logs (the curves are judged later)."""
        ended = timing.exit_outcome(
            list(read_stamped(outcome.stdout_log)),
            list(read_stamped(outcome.stderr_log)),
            outcome.exit_code,
            self._grammar(run.side),
            outcome.stopped,
        )
        if ended is not None:
            return ended.status, ended.reason
        if run.kind == SHARED_START:
            return timing.OK, ""
        try:
            check_verdict.curve(self.spec, run, self._grammar(run.side), outcome.stdout_log)
        except UserError as e:
            return timing.FAILED, e.message
        return timing.OK, ""
