"""Options several commands take, each defined once (CONTRIBUTING.md: one definition of each).

Every command takes `-q` and `-v`: quiet says nothing on stderr but errors (no progress, no
streamed build output); verbose adds the kit's log messages. Results on stdout are the same.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

F = TypeVar("F", bound=Callable[..., Any])
QUIET, NORMAL, VERBOSE = -1, 0, 1


def _set_level(ctx: click.Context, param: click.Parameter, value: int) -> None:
    root = ctx.find_root()
    level = root.meta.get("micakit.verbosity", NORMAL)
    if param.name == "quiet" and value:
        level = QUIET
    elif param.name == "verbose" and value:
        level = max(level, NORMAL) + value
    root.meta["micakit.verbosity"] = level
    if level >= VERBOSE:
        logging.basicConfig(stream=sys.stderr, format="micakit: %(name)s: %(message)s")
        logging.getLogger("kit").setLevel(logging.DEBUG if level > VERBOSE else logging.INFO)


def verbosity(f: F) -> F:
    """`-q` / `-v` on a command."""
    f = click.option(
        "-v",
        "--verbose",
        count=True,
        show_default=False,
        expose_value=False,
        callback=_set_level,
        help="Say more on stderr (the kit's log; -vv for debugging).",
    )(f)
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        callback=_set_level,
        help="Say nothing on stderr but errors.",
    )(f)


def level(ctx: click.Context | None = None) -> int:
    """QUIET, NORMAL or VERBOSE (or more) for the running command."""
    ctx = ctx or click.get_current_context()
    return int(ctx.find_root().meta.get("micakit.verbosity", NORMAL))


def say(text: str) -> None:
    """A line of information on stderr, unless quiet."""
    if level() > QUIET:
        click.echo(text, err=True)


class Unusable(click.BadParameter):
    """A parameter's value the kit cannot use, with the fix it prints (`kit.cli.main`)."""

    def __init__(
        self,
        message: str,
        fix: str,
        ctx: click.Context | None = None,
        param: click.Parameter | None = None,
    ) -> None:
        super().__init__(message, ctx, param)
        self.fix = fix


class ResultsFolder(click.Path):
    """A results directory that exists (report, publish, verify, compare, merge, --checks).

    Click's own check would say "Directory ... does not exist" and stop there; this one says
    what to name instead: a folder a series or a check wrote, not a file in it.
    """

    def __init__(self) -> None:
        super().__init__(exists=True, file_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(value)
        if not path.exists():
            raise Unusable(
                f"no results directory at {value}: it does not exist",
                "name the folder a `micakit series --out DIR` (or `correctness --out DIR`) "
                "wrote, e.g. results/L4",
                ctx,
                param,
            )
        if not path.is_dir():
            inside = path.resolve().parent
            where = (
                f"name the folder it lies in: {inside}"
                if (inside / "manifest.json").is_file()
                else "name the folder a `micakit series --out DIR` wrote, not a file"
            )
            raise Unusable(f"{value} is a file, not a results directory", where, ctx, param)
        return cast(Path, super().convert(value, param, ctx))  # path_type=Path


PROTOCOL_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
PROTOCOL_HELP = "The protocol file (default: the one the kit ships, its benchmarks/NanoGpt/ copy)."
DOCKER_HOST_HELP = (
    "Drive another machine's Docker engine, e.g. ssh://user@host (default: this one's)."
)


def protocol_option(f: F) -> F:
    return click.option("--protocol", "protocol_path", type=PROTOCOL_FILE, help=PROTOCOL_HELP)(f)


def docker_host_option(f: F) -> F:
    return click.option("--docker-host", help=DOCKER_HOST_HELP)(f)


@functools.cache
def reference() -> dict:
    """The shipped protocol's tables, read as plain TOML: `--help` names its models and
    precisions without loading (and checking) the whole protocol."""
    import tomllib  # the standard library's, quick
    from importlib import resources

    return tomllib.loads((resources.files("kit") / "files" / "protocol.toml").read_text("utf-8"))


def checks_option(f: F) -> F:
    return click.option(
        "--checks",
        "check_dirs",
        multiple=True,
        type=ResultsFolder(),
        help="Results directories of `micakit correctness` that gate the verdicts (rule 6).",
    )(f)


def preview_option(f: F) -> F:
    return click.option(
        "--preview",
        is_flag=True,
        help="Show every time, labelled 'preparation: not a protocol result' (rule 6).",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(f)


# -- ending the process ------------------------------------------------------------------------

_READS_ONLY = {"set": False}


def reads_only() -> None:
    """The running command only reads and prints (report, verify, compare): once it is done,
    its process may end without freeing the objects it made one by one (`kit.cli.program.run`).
    A command that starts runs or containers never says so: it has work left at exit."""
    _READS_ONLY["set"] = True


def ends_quickly() -> bool:
    return _READS_ONLY["set"]


def _protocol_tables(ctx: click.Context) -> dict:
    """The protocol's tables as plain TOML, for completion: the file --protocol names where it
    was typed before, else the shipped one (a file that does not read completes nothing)."""
    import tomllib
    from importlib import resources

    named = ctx.params.get("protocol_path")
    shipped = resources.files("kit") / "files" / "protocol.toml"
    try:
        return tomllib.loads((Path(named) if named else shipped).read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def complete_models(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The shell's completion of --model: the protocol's models."""
    names = list(_protocol_tables(ctx).get("models", {}))
    return [n for n in names if n.startswith(incomplete)]


def complete_precisions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The shell's completion of --precision: the protocol's precisions."""
    names = _protocol_tables(ctx).get("precisions", {}).get("names", [])
    return [n for n in names if isinstance(n, str) and n.startswith(incomplete)]
