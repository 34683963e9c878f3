"""Each side's software versions (rule 4, §6), read where its runs run.

Each side's versions are read where its runs run (its image, or this machine's Python), by a
short probe run through the same executor. A resumed series reads them again and refuses to
go on if any changed (kit.results.documents.check_unchanged): a series' numbers all carry one
set of conditions.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kit.errors import SeriesFailed, UserError
from kit.executors import programs
from kit.executors.base import Executor, Mount, RunSpec
from kit.measure import timing
from kit.measure.stamped import read_stamped
from kit.protocol.load import Protocol
from kit.results.documents import ANSWERS
from kit.sides import versions_probe
from kit.telemetry import kernels

# The PyTorch side's probe: a module of the kit run where nanoGPT's runs run (rule 4), with the
# SDPA probe it imports (§6); the rest of the kit is not there.
PROBE = "kit.sides.versions_probe"
PROBE_FILES = ("sides/versions_probe.py", "telemetry/sdpa_probe.py")
MARKER = versions_probe.MARKER


def _clear(scratch: Path) -> None:
    # the stamped logs grow by appending: a probe stopped midway (kill -9) must not leave lines
    # that the next reading would take for its own
    shutil.rmtree(scratch, ignore_errors=True)


def _probe_outcome(executor: Executor, spec: RunSpec, scratch: Path) -> tuple[Any, list[str]]:
    outcome = executor.run(spec, scratch)
    lines = [x.text for x in read_stamped(outcome.stdout_log)]
    lines += [x.text for x in read_stamped(outcome.stderr_log)]
    return outcome, lines


def _probe(executor: Executor, spec: RunSpec, scratch: Path) -> tuple[int | None, list[str]]:
    outcome, lines = _probe_outcome(executor, spec, scratch)
    return outcome.exit_code, lines


def pytorch_versions(
    executor: Executor, python: str, workdir_mount: Mount, image: str | None, scratch: Path
) -> dict[str, Any]:
    _clear(scratch)
    program = Mount("programs", scratch / "programs")
    programs.ship(PROBE_FILES, program.host)
    spec = RunSpec(
        label="versions of the PyTorch side",
        argv=(python, "-m", PROBE),
        env=programs.env(executor.where(program)),
        mounts=(workdir_mount, program),
        image=image,
    )
    code, lines = _probe(executor, spec, scratch)
    found = [ln for ln in lines if ln.startswith(MARKER + " ")]
    if code != 0 or not found:
        tail = " | ".join(lines[-3:])
        raise UserError(
            f"the PyTorch side's environment did not report its versions (exit {code}): {tail}",
            "check that torch is installed where the PyTorch side runs (README#set-up)",
        )
    versions = json.loads(found[-1][len(MARKER) + 1 :])
    try:
        versions["sdpa_backends"] = kernels.parse_sdpa_probe("\n".join(lines)).to_dict()
    except kernels.SdpaProbeError as e:
        versions["sdpa_backends"] = f"unreadable: {e}"
    return versions


def torch_pin(protocol: Protocol, found: dict[str, Any], allowed: bool) -> dict[str, Any]:
    """The protocol pins torch (`[pytorch] torch`); another is refused unless allowed.

    Rule 9: numbers under another torch are preparation, and say so wherever they appear. The
    local version label (`+cpu`, `+cu128`) names the build, not the release, and is not compared.
    """
    pinned = protocol.pytorch.torch
    running = str(found.get("torch") or "")
    if running.split("+", 1)[0] == pinned:
        return {"torch_pinned": pinned}
    if not allowed:
        raise UserError(
            f"the PyTorch side runs torch {running or 'none'}, and the protocol pins {pinned}",
            f"install torch=={pinned} where the PyTorch side runs, or pass --allow-torch to run "
            "anyway as preparation (rule 9: every number is labelled so)",
        )
    return {"torch_pinned": pinned, "torch_other_allowed": True}


NO_VERSION = "gave no version information"
ANSWER_S = 30.0  # a program asked its version answers within this, or it gave none


def contender_versions(
    executor: Executor,
    spec: RunSpec,
    protocol: Protocol,
    scratch: Path,
    recorded: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the contender says of itself, and whether it is a release or a development build.

    Asked twice, each time within ANSWER_S seconds (a program that does not know
    `+mica info -mica` may start training instead: it is stopped). Two equal answers are its
    version, compared at every resume; none, or two that differ, are recorded as
    "gave no version information", the answers kept beside it and never compared: the
    program's identity is its SHA-256 (its image's id under Docker), recorded by the side.
    At a resume (`recorded`) it is asked once, its answer compared with the recorded one; one
    that gave none is not asked again (its identity is checked all the same).
    Rule 9: a development build's numbers are preparation, and are labelled so everywhere.
    """
    if recorded is not None and recorded.get("says") == NO_VERSION:
        return {k: recorded[k] for k in ("says", "build_kind", ANSWERS) if k in recorded}
    asked = dataclasses.replace(spec, stall_s=ANSWER_S, limit_s=ANSWER_S)
    answers = []
    for k in (1,) if recorded is not None else (1, 2):
        _clear(scratch / f"ask-{k}")
        outcome, lines = _probe_outcome(executor, asked, scratch / f"ask-{k}")
        _refuse_buffered(outcome.stdout_log, protocol, asked)
        answers.append(
            {
                "exit_code": outcome.exit_code,
                "stopped": outcome.stopped,
                "text": "\n".join(lines).strip()[:2000],
            }
        )
    text, code = answers[0]["text"], answers[0]["exit_code"]
    answered = all(a["stopped"] is None for a in answers) and answers[0] == answers[-1]
    if not answered:
        return {"says": NO_VERSION, "build_kind": NO_VERSION, ANSWERS: answers}
    development = bool(re.search(protocol.contender.development_pattern, text)) or code != 0
    return {
        "says": text,
        "exit_code": code,
        "build_kind": "development" if development else "release",
    }


def _refuse_buffered(stdout_log: Path, protocol: Protocol, asked: RunSpec) -> None:
    """§5's clock, checked before the first run: a program that trains when asked its version
    shows whether its lines leave at once. Buffered, every run of it would be void, so the
    series stops before it starts (exit 3, as at a void run for the same cause)."""
    held = timing.buffered_output(list(read_stamped(stdout_log)), protocol.contender)
    if held:
        said, _, fix = held.partition("; fix: ")
        raise SeriesFailed(
            f"asked its version ({' '.join(asked.argv[1:])}), the contender trained instead, "
            f"and {said}; every run of it would be void, so the series stops before its "
            "first run",
            f"{fix}; then `micakit series --resume` its results directory",
        )
