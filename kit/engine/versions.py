"""Every software version a number carries (rule 4, §6), recorded once per series.

Each side's versions are read where its runs run (its image, or this machine's Python), by a
short probe run through the same executor. A resumed series reads them again and refuses to
go on if any changed: a series' numbers all carry one set of conditions.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from kit import __version__
from kit.engine import versions_probe
from kit.errors import UserError
from kit.executors import programs
from kit.executors.base import Executor, Mount, RunSpec
from kit.measure.clock import read_stamped
from kit.protocol.load import Protocol
from kit.telemetry import kernels

VERSIONS = "versions.json"

# The PyTorch side's probe: a module of the kit run where nanoGPT's runs run (rule 4), with the
# SDPA probe it imports (§6); the rest of the kit is not there.
PROBE = "kit.engine.versions_probe"
PROBE_FILES = ("engine/versions_probe.py", "telemetry/sdpa_probe.py")
MARKER = versions_probe.MARKER


def _clear(scratch: Path) -> None:
    # the stamped logs grow by appending: a probe stopped midway (kill -9) must not leave lines
    # that the next reading would take for its own
    shutil.rmtree(scratch, ignore_errors=True)


def _probe(executor: Executor, spec: RunSpec, scratch: Path) -> tuple[int | None, list[str]]:
    outcome = executor.run(spec, scratch)
    lines = [x.text for x in read_stamped(outcome.stdout_log)]
    lines += [x.text for x in read_stamped(outcome.stderr_log)]
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


def contender_versions(
    executor: Executor, spec: RunSpec, protocol: Protocol, scratch: Path
) -> dict[str, Any]:
    """What the contender says of itself, and whether it is a release or a development build.

    Rule 9: a development build's numbers are preparation, and are labelled so everywhere.
    """
    _clear(scratch)
    code, lines = _probe(executor, spec, scratch)
    text = "\n".join(lines).strip()
    development = bool(re.search(protocol.contender.development_pattern, text)) or code != 0
    return {
        "says": text[:2000],
        "exit_code": code,
        "build_kind": "development" if development else "release",
    }


def collect(kit_commit: str, card: dict, executor: Executor, sides: dict) -> dict[str, Any]:
    return {
        "kit": {"version": __version__, "commit": kit_commit},
        "card": card,
        "executor": {"name": executor.name, **executor.versions()},
        **sides,
    }


def check_unchanged(recorded: dict, now: dict) -> None:
    """Refuse to resume when any version differs; name every one that did."""
    changed = []

    def walk(a: Any, b: Any, where: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                walk(a.get(k), b.get(k), f"{where}.{k}" if where else k)
        elif a != b:
            changed.append(f"{where}: {a!r} then, {b!r} now")

    walk(recorded, now, "")
    if changed:
        raise UserError(
            "the versions this series runs under changed since it started:\n  "
            + "\n  ".join(changed),
            "resume where it started (same card, images and kit), or start a new series",
        )


def kit_commit() -> str:
    """The kit's own commit: read from its checkout without running git, else from the image.

    The runner image has no .git; its build argument KIT_COMMIT becomes MICAKIT_COMMIT there.
    """
    git = Path(str(resources.files("kit"))).parent / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        common = git / "commondir"
        roots = [git] + ([git / common.read_text().strip()] if common.is_file() else [])
        for root in roots:
            if (root / ref).is_file():
                return (root / ref).read_text().strip()
            packed = root / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
    except (OSError, IndexError):
        pass
    return os.environ.get("MICAKIT_COMMIT") or "unknown"
