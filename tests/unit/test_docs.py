"""The README is a front door and the docs a site: the README stays short, the site builds with
`mkdocs build --strict` (a broken link, a missing anchor or a page left out of the navigation
fails), and every `micakit` command the README and the pages show names a command and options
that exist, so a reader who copies one gets the command, not a usage error."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from kit.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MOST_LINES = 150
FENCE = re.compile(r"^```(?:sh|bash|console)?\s*$")


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MOST_LINES, f"README.md has {len(lines)} lines"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra: pip install -e '.[dev]'")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "index.html").is_file()


def _shell_blocks(text: str) -> list[str]:
    """The lines of every shell code block, a continued line joined to the one before."""
    out: list[str] = []
    fenced = shell = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            shell = fenced and bool(FENCE.match(line))
            continue
        if not shell:
            continue
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1] + " " + line.strip()
        else:
            out.append(line.strip())
    return out


def _commands() -> list[tuple[str, list[str]]]:
    """Every `micakit ...` invocation in a shell block, as (page, words after `micakit`)."""
    found = []
    for page in PAGES:
        for line in _shell_blocks(page.read_text(encoding="utf-8")):
            line = line.split(" #", 1)[0]
            if "..." in line or "…" in line:
                continue  # an elided line shows a shape, not a command
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            for i, w in enumerate(words):
                if w == "micakit" or w.endswith("/micakit"):
                    found.append((page.name, words[i + 1 :]))
                    break
    return found


def _resolve(words: list[str]) -> tuple[click.Command, list[str]]:
    """The command the words name and the words left for its options."""
    ctx = click.Context(main)
    command: click.Command = main
    rest = list(words)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"no command {rest[0]!r} in {words}"
        command, rest = sub, rest[1:]
    return command, rest


def test_the_pages_show_micakit_commands() -> None:
    assert len(_commands()) >= 10


@pytest.mark.parametrize(("page", "words"), _commands(), ids=lambda v: str(v)[:60])
def test_every_command_shown_exists_with_its_options(page: str, words: list[str]) -> None:
    command, rest = _resolve(words)
    known = {"--help", "-h"}
    for p in command.params:
        known.update(p.opts)
        known.update(p.secondary_opts)
    for w in rest:
        if w == "--":
            break  # what follows goes to another command
        if w.startswith("-") and w != "-":
            assert w.split("=", 1)[0] in known, f"{page}: `micakit {' '.join(words)}`: {w} unknown"
