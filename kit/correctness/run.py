"""`micakit correctness` (§7, D5): methods A and B, run as a series runs, judged from raw logs.

The protocol's correctness.sh as one command. Every run is a fresh process started through the
executor and read by the outside clock; its record is appended (fsynced) only once it ended,
so a check stopped at any point resumes with every finished run kept. Method B's shared start
(nanoGPT's own initialization as `ckpt.pt`, its safetensors export, one batch order) is made
once, by run 0, in the PyTorch side's environment. When every run has finished, the curves are
parsed from the stamped logs and judged by `kit.correctness.methods`; the verdict is appended to
`checks.jsonl` beside its plot and tables (the command renders `correctness.md`).
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import platform
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kit import __version__
from kit.correctness import checks
from kit.correctness import methods as corr
from kit.engine import store, versions
from kit.engine.scheduler import CONTENDER, PYTORCH, Config
from kit.engine.series import Interrupted, sigterm_as_interrupt
from kit.engine.store import ResultsDir
from kit.errors import SeriesFailed, UserError
from kit.executors import programs
from kit.executors.base import Executor, Mount, RunOutcome, RunSpec
from kit.measure import timing
from kit.measure.clock import read_stamped
from kit.protocol.load import Protocol
from kit.sides.side import ContenderSide, PyTorchSide, RunContext, fill_template
from kit.sides.workspace import PATCHED
from kit.status import RunStatus

KIND = "correctness"  # the manifest's kind: a check's results directory, not a series'
RECORD_SCHEMA = 1
SHARED_START, TRAINING = "shared-start", "training"  # the kinds of a check's runs
SHARED_DIR = "shared_start"  # §7 B: the shared start, in the results directory
CKPT, INIT, BATCHES = "ckpt.pt", "init.safetensors", "batch_order.npy"
# The shared start is made by the kit's own shared_start.py, copied beside what it makes (D6:
# every script is published) and run where the PyTorch side runs: its torch, its model.py.
MAKER_FILES = (  # the maker (kit/correctness/make_start.py) and the little it imports
    "errors.py",
    "correctness/shared_start.py",
    "correctness/make_start.py",
)


@dataclass(frozen=True)
class CheckSpec:
    """What a check runs and judges by; saved in the manifest, taken from it on resume."""

    method: str  # "A" or "B"
    model: str
    precision: str  # method B: float32 (§7 B)
    seeds: tuple[int, ...]  # method B: the shared start's one seed
    card: str
    device: str
    smoke: bool
    contender_build: str  # amendment 4.2: the build the verdict compares
    pytorch_mode: str  # method A: the protocol's mode; method B: eager (compile=False)
    steps: int  # method A: the model's whole schedule; method B: its steps
    eval_interval: int
    eval_iters: int
    from_step: int  # method A: judged from this step on
    batch_size: int | None = None  # amendment 5.1: the batch its series halved, if it did

    def config(self, side: str) -> Config:
        variant = self.pytorch_mode if side == PYTORCH else self.contender_build
        return Config(self.card, self.model, self.precision, side, variant)


@dataclass(frozen=True)
class CheckRun:
    run_id: int
    kind: str  # shared-start or training
    side: str
    seed: int

    @property
    def slug(self) -> str:
        return SHARED_START if self.kind == SHARED_START else f"{self.side}.seed{self.seed}"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def plan_runs(spec: CheckSpec) -> list[CheckRun]:
    """§7 A: each seed on both sides; §7 B: the shared start, then one run a side."""
    runs = [CheckRun(0, SHARED_START, PYTORCH, spec.seeds[0])] if spec.method == "B" else []
    for seed in spec.seeds:
        for side in (PYTORCH, CONTENDER):
            runs.append(CheckRun(len(runs), TRAINING, side, seed))
    return runs


def make_spec(p: Protocol, o: dict[str, Any]) -> CheckSpec:
    c, smoke, a = p.correctness, o["smoke"], o["method"] == "A"
    steps = p.model(o["model"]).full_steps if a else c.method_b_steps
    builds = [b.name for b in p.builds_for(o["precision"]) if b.primary]
    return CheckSpec(
        method=o["method"],
        model=o["model"],
        precision=o["precision"],
        seeds=tuple(o["seeds"]),
        card=o["card"],
        device=o["device"],
        smoke=smoke,
        contender_build=builds[0],
        pytorch_mode=c.pytorch_mode if a else "eager",
        steps=(c.smoke_full_steps if a else c.smoke_method_b_steps) if smoke else steps,
        eval_interval=c.smoke_eval_interval if smoke else c.eval_interval,
        eval_iters=c.smoke_eval_iters if smoke else c.eval_iters,
        from_step=c.smoke_method_a_from_step if smoke else c.method_a_from_step,
        batch_size=o.get("batch_size"),
    )


def method_b_windows(
    p: Protocol, spec: CheckSpec
) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """Method B's judged window and the one published beside it (amendment 6), both scaled to
    a smoke check's steps."""
    scale = spec.steps / p.correctness.method_b_steps

    def scaled(w: tuple[int, int]) -> tuple[int, int]:
        return (w[0], max(w[0], round(w[1] * scale)))

    beside = p.method_b_beside_window(spec.model)
    return scaled(p.method_b_window(spec.model)), scaled(beside) if beside else None


# -- nanoGPT's configuration, read as its configurator makes it --------------------------------


def _constant(node: ast.expr) -> Any:
    """A literal, or arithmetic on literals (nanoGPT writes `5 * 8`); anything else: ValueError."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)
        if not all(isinstance(n, allowed) for n in ast.walk(node)):
            raise
        return eval(compile(ast.Expression(node), "train.py", "eval"), {"__builtins__": {}})


def nanogpt_config(tree: Path, argv: Sequence[str]) -> dict[str, Any]:
    """nanoGPT's settings as its train.py holds them after its configurator ran `argv`.

    The defaults are train.py's literal assignments before `config_keys`; a config file is run
    as the configurator runs it (exec over those globals); `--key=value` must name a known key
    and keep its type, as the configurator asserts.
    """
    cfg: dict[str, Any] = {}
    for node in ast.parse((tree / "train.py").read_text("utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "config_keys":
                break
            try:
                cfg[node.targets[0].id] = _constant(node.value)
            except (ValueError, SyntaxError, TypeError):
                continue  # an expression (dtype's): not a setting the shared start reads
    for arg in argv:
        if "=" not in arg:
            scope: dict[str, Any] = dict(cfg)
            exec(compile((tree / arg).read_text("utf-8"), arg, "exec"), scope)
            cfg |= {k: v for k, v in scope.items() if not k.startswith("_")}
            continue
        key, _, text = arg.removeprefix("--").partition("=")
        if key not in cfg:
            raise UserError(f"nanoGPT's train.py has no setting {key!r} (from {arg})")
        try:
            value = ast.literal_eval(text)
        except (SyntaxError, ValueError):
            value = text
        if type(value) is not type(cfg[key]):
            raise UserError(f"{arg}: nanoGPT's {key} is a {type(cfg[key]).__name__}")
        cfg[key] = value
    return cfg


# -- the runner ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    """A finished check: its record (appended to checks.jsonl) and what it was judged from."""

    record: checks.CheckRecord
    result: corr.MethodAResult | corr.MethodBResult


class CheckRunner:
    """One check bound to its results directory, protocol, sides and executor."""

    def __init__(
        self,
        rd: ResultsDir,
        protocol: Protocol,
        options: dict[str, Any],
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
        gpu = str(options["card_info"].get("uuid")) if options["device"] == "cuda" else None
        self.ctx = RunContext(
            protocol, executor, options["device"], gpu, self.work, smoke=options["smoke"]
        )
        self.shared = Mount("shared_start", rd.root / SHARED_DIR)

    def write_start(self, argv: list[str]) -> None:
        """Protocol file, plan, products record, then the manifest (a check without one never
        started, and the same command starts it again)."""
        if self.o["products"]:
            slug = self.spec.config(CONTENDER).slug
            src = Path(self.o["products"]) / "work" / "products" / f"{slug}.products"
            dest = self.work / "products" / src.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            self.o["products_sha256"] = store.sha256_file(dest)
        self.rd.write_text(store.PROTOCOL, self.p.path.read_text("utf-8"))
        self.rd.write_json(store.PLAN, {"schema": store.SCHEMA, "order": self._plan_json()})
        self.rd.write_json(
            store.MANIFEST,
            {
                "schema": store.SCHEMA,
                "kind": KIND,
                "kit_version": __version__,
                "kit_commit": versions.kit_commit(),
                "protocol_name": self.p.name,
                "protocol_sha256": self.p.sha256,
                "command": argv,
                "date_utc": _now(),
                "host": self.executor.host(),
                "platform": platform.platform(),
                "python": sys.version.split()[0],
                "executor": self.executor.name,
                "executor_versions": self.executor.versions(),
                "check": dataclasses.asdict(self.spec),
                "options": self.o,
            },
        )

    def _plan_json(self) -> list[dict]:
        return [r.to_json() for r in self.plan]

    def check_resume(self) -> None:
        recorded = self.rd.manifest()["protocol_sha256"]
        if recorded != self.p.sha256:
            raise UserError(
                f"{self.rd.root} was checked under a protocol file with SHA-256 "
                f"{recorded[:12]}…, and {self.p.path} has {self.p.sha256[:12]}…",
                f"resume with the protocol it started under: --protocol "
                f"{self.rd.root / store.PROTOCOL}",
            )
        if self.rd.read_json(store.PLAN)["order"] != self._plan_json():
            raise UserError(
                f"the planned runs of {self.rd.root} differ from what this kit plans now",
                "resume with the kit version named in its manifest.json",
            )
        self.rd.check_raw_files()

    # -- running ---------------------------------------------------------------------------

    def run(self) -> Judged:
        """Every planned run without a finished record, in order; then the verdict."""
        self.rd.lock("a check")  # one writer per results directory (kit.engine.lock)
        latest = {r["run_id"]: r for r in self.rd.records()}
        done = {i for i, r in latest.items() if r["status"] == timing.OK}
        self.say(f"{len(self.plan)} runs planned, {len(done)} already done")
        self.executor.sweep()
        self._versions()
        with sigterm_as_interrupt():
            for run in self.plan:
                if run.run_id in done:
                    continue
                self.say(f"run {run.run_id + 1}/{len(self.plan)}: {self._describe(run)}")
                record = self._run_one(run)
                if record["status"] != timing.OK:
                    raise SeriesFailed(self._failure(run, record))
        return self.judge()

    def _describe(self, run: CheckRun) -> str:
        if run.kind == SHARED_START:
            return "the shared start (nanoGPT's initialization, safetensors, batch order)"
        return f"{run.side} seed {run.seed}, {self.spec.steps} steps"

    def _versions(self) -> None:
        """Rule 4: recorded before the first run, unchanged at every resume."""
        scratch = self.work / "versions"
        path = self.rd.root / versions.VERSIONS
        before = self.rd.read_json(versions.VERSIONS) if path.exists() else {}
        found = versions.collect(
            versions.kit_commit(),
            self.o["card_info"],
            self.executor,
            {
                s.name: s.versions(self.ctx, scratch / s.name, before.get(s.name))
                for s in (self.pytorch, self.contender)
            },
        )
        shutil.rmtree(scratch, ignore_errors=True)
        if (self.rd.root / versions.VERSIONS).exists():
            versions.check_unchanged(self.rd.read_json(versions.VERSIONS), found)
        else:
            self.rd.write_json(versions.VERSIONS, found)

    def _run_one(self, run: CheckRun) -> dict:
        log_dir = self.rd.new_attempt_dir(run.run_id, run.slug)
        scratch = self.work / "method_b" / f"{run.run_id:04d}-{log_dir.name}"
        spec = self._spec(run, scratch)
        # a hang is stopped at the protocol's stall limit and fails like any other failure
        spec = dataclasses.replace(spec, stall_s=self.p.timing.stall_s)
        store.write_json(log_dir / "command.json", {"argv": list(spec.argv), "env": spec.env})
        started = _now()
        try:
            outcome = self.executor.run(spec, log_dir)
        except KeyboardInterrupt:
            raise Interrupted(spec.label) from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)  # a copy of ckpt.pt (GBs for M2b)
        status, reason = self._judge(run, outcome)
        record = {
            "schema": RECORD_SCHEMA,
            "run_id": run.run_id,
            "kind": run.kind,
            "side": run.side,
            "seed": run.seed,
            "config": self.spec.config(run.side).id,
            "log_dir": self.rd.rel(log_dir),
            "started_utc": started,
            "start_ns": outcome.start_ns,
            "end_ns": outcome.end_ns,
            "exit_code": outcome.exit_code,
            "stopped": outcome.stopped,
            "status": status,
            "reason": reason,
            "executor": self.executor.name,
            "files": {self.rd.rel(f): store.sha256_file(f) for f in _files(log_dir)},
        }
        if run.kind == SHARED_START and status == timing.OK:
            self._export_here()
            record["outputs"] = {
                self.rd.rel(f): store.sha256_file(f) for f in _files(self.shared.host)
            }
        self.rd.append_record(record)
        return record

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
            out_dir = f"{ex.where(Mount('work', self.work))}/{scratch.relative_to(self.work)}"
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
            mounts = (self.shared,)
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
        vocab = _meta_vocab(meta) if meta.is_file() else 50304
        model_args = {k: cfg[k] for k in ("n_layer", "n_head", "n_embd", "block_size", "bias")}
        model_args |= {"vocab_size": vocab, "dropout": 0.0}
        programs.ship(MAKER_FILES, self.shared.host / "maker")
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
            env=programs.env(f"{shared}/maker"),
            mounts=(nanogpt, dataclasses.replace(self.shared, read_only=False)),
            image=self.pytorch.image,
        )

    def _export_here(self) -> None:
        """§7 B: the contender's safetensors copy of the initial weights, made by the kit itself
        where the PyTorch side's measured image has no safetensors (§8 keeps that image to what
        `pip install torch numpy` brings)."""
        if (self.shared.host / INIT).exists():
            return
        try:
            from kit.correctness import shared_start

            shared_start.export_safetensors(self.shared.host / CKPT, self.shared.host / INIT)
        except ModuleNotFoundError as e:
            raise UserError(
                f"method B's safetensors export needs {e.name} where the kit runs",
                "install the kit with its training extras: pip install 'micakit[train]'",
            ) from None

    def shared_outputs(self) -> dict[str, str]:
        """The shared start's files and SHA-256, as run 0 recorded them."""
        made = [
            r
            for r in self.rd.records()
            if r["kind"] == SHARED_START and r["status"] == RunStatus.OK
        ]
        return made[-1]["outputs"] if made else {}

    def _check_shared_start(self) -> None:
        """What the sides read is what run 0 made: this model's shapes, the same bytes."""
        from kit.correctness import shared_start

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
        grammar = self.pytorch.grammar(self.p) if run.side == PYTORCH else self.p.contender
        ended = timing.exit_outcome(
            list(read_stamped(outcome.stdout_log)),
            list(read_stamped(outcome.stderr_log)),
            outcome.exit_code,
            grammar,
            outcome.stopped,
        )
        if ended is not None:
            return ended.status, ended.reason
        if run.kind == SHARED_START:
            return timing.OK, ""
        try:
            self.curve(run, outcome.stdout_log)
        except UserError as e:
            return timing.FAILED, e.message
        return timing.OK, ""

    def _failure(self, run: CheckRun, record: dict) -> str:
        shown = timing.tail_block(self.rd.root / record["log_dir"])
        return (
            f"run {run.run_id} ({self._describe(run)}) failed: {record['reason']} (exit code "
            f"{record['exit_code']}); the check stops here.\n"
            f"  the tail of its output ({record['log_dir']}):\n{shown}\n"
            f"  every finished run is kept; once the cause is fixed, "
            f"`micakit correctness --resume {self.rd.root}` runs this one again"
        )

    # -- judging, from the raw logs alone (D6) --------------------------------------------------

    def curve(self, run: CheckRun, stdout_log: Path) -> pd.DataFrame:
        """A run's evaluations (A) or every step's loss (B), through to the check's last step."""
        where = f"run {run.run_id} ({run.side} seed {run.seed})"
        lines = corr.read_log_lines(stdout_log)
        if self.spec.method == "A":
            df, what = corr.parse_eval_lines(lines, where=where), "evaluation"
        else:
            g = self.pytorch.grammar(self.p) if run.side == PYTORCH else self.p.contender
            df, what = corr.parse_train_lines(lines, g.line_regex, g.step_prefix, where), "loss"
        if not len(df):
            grammar = corr.EVAL_LINE_REGEX if self.spec.method == "A" else g.line_regex
            raise UserError(f"{where} printed no {what} line (the grammar {grammar!r})")
        last = int(df["step"].iloc[-1])
        if last != self.spec.steps:
            raise UserError(
                f"{where} stopped early: its last {what} is at step {last}, and "
                f"the check needs step {self.spec.steps}"
            )
        return df

    def judge(self) -> Judged:
        """The verdict over every run's curve: its record (checks.jsonl), plot and tables."""
        from kit.report import plots

        s, c, root = self.spec, self.p.correctness, self.rd.root
        ok = {r["run_id"]: r for r in self.rd.records() if r["status"] == timing.OK}
        curves: dict[str, dict[int, pd.DataFrame]] = {PYTORCH: {}, CONTENDER: {}}
        for run in self.plan:
            if run.kind == TRAINING:
                log = root / ok[run.run_id]["log_dir"] / "stdout.log"
                curves[run.side][run.seed] = self.curve(run, log)
        common = {"contender_build": s.contender_build, "logs": "runs", "date_utc": _now()}
        title = f"{self.p.model(s.model).label} ({s.model}), {s.precision}, {s.card}"
        if s.method == "A":
            a = corr.method_a(
                curves[PYTORCH],
                curves[CONTENDER],
                s.from_step,
                eval_interval=s.eval_interval,
                last_step=s.steps,
            )
            record = checks.record_method_a(a, s.card, s.model, s.precision, **common)
            plots.plot_method_a(a, root / "method_a.png", f"§7 A: {title}")
            tables = {"method_a": a.table, "method_a_final": a.final, "method_a_curves": a.curves}
            result: corr.MethodAResult | corr.MethodBResult = a
        else:
            window, beside = method_b_windows(self.p, s)
            pt, ct = curves[PYTORCH][s.seeds[0]], curves[CONTENDER][s.seeds[0]]
            b = corr.method_b(pt, ct, c.step0_tolerance, c.step_tolerance, window, beside)
            record = checks.record_method_b(b, s.card, s.model, **common)
            plots.plot_method_b(
                pt,
                ct,
                window,
                root / "method_b.png",
                f"§7 B: {title}",
                also_window=beside,
                step_tol=c.step_tolerance,
            )
            tables, result = {"method_b": b.table}, b
        for name, df in tables.items():
            self.rd.write_text(f"tables/{name}.csv", df.to_csv(index=False, float_format="%.17g"))
        # a check judged again (a resume after it finished) appends nothing new
        same = [r for r in checks.load_checks(root) if _key(r) == _key(record)]
        if not same or dataclasses.replace(same[-1], date_utc="") != dataclasses.replace(
            record, date_utc=""
        ):
            checks.append_check(root, record)
        return Judged(record, result)


def _key(r: checks.CheckRecord) -> tuple[str, str, str, str]:
    return (r.method, r.card, r.model, r.precision)


def _meta_vocab(path: Path) -> int:
    import pickle

    with open(path, "rb") as f:
        return int(pickle.load(f)["vocab_size"])


def _files(folder: Path) -> list[Path]:
    return sorted(f for f in folder.rglob("*") if f.is_file() and "maker" not in f.parts)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


# -- the verdict gate (§3 rule 6, amendment 7.3) ------------------------------------------------


def checks_for_series(series_dir: Path, check_dirs: Sequence[Path]) -> dict[str, str]:
    """ "model/precision/build" -> "passed" or why not, for `report.tables(rd, checks=...)`.

    Reads every check record of `check_dirs` (each a `micakit correctness` results directory,
    run under the series' protocol file and, for a smoke series, smoke checks only) and judges
    the series' card, models and precisions by `correctness.check_statuses`.
    """
    manifest = ResultsDir.open(Path(series_dir)).manifest()
    series = manifest.get("series") or {}
    records: list[checks.CheckRecord] = []
    for d in check_dirs:
        m = ResultsDir.open(Path(d)).manifest()
        if m.get("kind") != KIND:
            raise UserError(
                f"--checks {d} is not a correctness check's results directory",
                "name a directory that `micakit correctness` wrote",
            )
        if m["protocol_sha256"] != manifest["protocol_sha256"]:
            raise UserError(
                f"--checks {d} ran under another protocol file than the series {series_dir}",
                "a check gates only the series of its own protocol (§3 rule 1)",
            )
        if bool(m["check"]["smoke"]) != bool(series.get("smoke")):
            what = "a smoke check" if m["check"]["smoke"] else "a full check"
            raise UserError(
                f"--checks {d} is {what}, and the series is not alike",
                "a smoke check gates only a smoke series",
            )
        records += checks.load_checks(Path(d))
    protocol = store.load_protocol(ResultsDir.open(Path(series_dir)))
    precisions = series.get("precisions", [])
    builds = {p: [b.name for b in protocol.builds_for(p)] for p in precisions}
    c, smoke = protocol.correctness, bool(series.get("smoke"))
    # amendments 7.1 and 7.3: the protocol's seeds on its five-seed card; a smoke check runs on
    # the CPU with the seeds it was given, and a smoke series is a preview whatever it says
    return checks.check_statuses(
        series.get("card", ""),
        series.get("models", []),
        precisions,
        records,
        builds=builds,
        seeds=None if smoke else c.seeds,
        five_seed_card=None if smoke else c.five_seed_card,
    )
