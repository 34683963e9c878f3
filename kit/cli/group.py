"""The `micakit` group's behaviour: commands kept in modules of their own imported only when
called, and what the user must fix turned into a message, its fix and an exit code (bugs keep
their traceback); a stop (Ctrl-C, SIGTERM) ends with the line that says how to go on.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from kit.errors import (
    ExitCode,
    Interrupted,
    MachineError,
    UserError,
    machine_error,
    sigterm_as_interrupt,
    stopped,
)


class KitGroup(click.Group):
    """Maps what the user must fix to a message and an exit code; bugs keep their traceback.

    `lazy` names commands kept in modules of their own, imported only when the command is called
    (start-up speed): name -> (module, attribute, the one line `micakit --help` shows).
    `resumable` names the commands that keep a results directory and take `--resume` (their
    first act names it in `ctx.meta["resume_hint"]`): a stop says how to go on with it.
    """

    def __init__(
        self, *args: Any, lazy: dict[str, tuple[str, str, str]] | None = None, **kwargs: Any
    ) -> None:
        resumable: tuple[str, ...] = tuple(kwargs.pop("resumable", ()))
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})
        self.resumable = resumable

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attribute, _ = self.lazy[cmd_name]
            # lazy: the command's module imports numpy and the kit's engine (start-up speed)
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # named before its module is imported: a stop during the import knows what it stopped
        if args:
            ctx.meta["command"], ctx.meta["command_args"] = args[0], args[1:]
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click lists commands, but a lazy one by its stored line, left unimported."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in self.lazy and name not in self.commands:
                stub = click.Command(name, help=self.lazy[name][2])
                rows.append((name, stub.get_short_help_str(limit)))
                continue
            cmd = self.commands[name]
            if not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:  # the group's own: `micakit --bogus`
            _usage(ctx, e)

    def invoke(self, ctx: click.Context) -> object:
        # SIGTERM is Ctrl-C from the command's first act: a stop during start-up (the data, the
        # manifest, the versions' probes) ends like a stop at any other moment
        with sigterm_as_interrupt():
            return self._mapped(ctx)

    def _mapped(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:  # a command's options and arguments, an unknown command
            _usage(ctx, e)
        except UserError as e:
            fix = e.fix
            if isinstance(e, MachineError):
                # every finished run is kept (fsynced records): once fixed, the series goes on
                fix = f"{fix}, then {_again(ctx)}" if _again(ctx) else fix
            _say_error(e.message, fix)
            ctx.exit(int(e.exit_code))
        except OSError as e:
            hint = ctx.meta.get("resume_hint")
            # a write that failed names no file; the writes of the data and the kit's cache
            # name their folders themselves (kit.errors.writing), so this one was the results
            # directory's
            unnamed = hint and not e.filename
            said = machine_error(e, hint, elsewhere="--out") if unnamed else machine_error(e)
            if said is None:
                if _a_stop(e):
                    _interrupted(ctx, "")  # the stop's, not a bug
                raise  # a bug keeps its traceback
            again = _again(ctx)
            _say_error(said.message, f"{said.fix}, then {again}" if again else said.fix)
            ctx.exit(int(ExitCode.USER_ERROR))
        except (KeyboardInterrupt, Interrupted) as e:
            _interrupted(ctx, str(e))
        except Exception as e:
            if isinstance(e, click.exceptions.Exit) or not _a_stop(e):
                raise  # a bug keeps its traceback
            # Ctrl-C's or SIGTERM's interrupt that came out as another error (an extension
            # module's import turns it into ImportError): the stop, said as any other
            _interrupted(ctx, "")
        finally:
            # the one writer's locks, where a command took one (its module is then imported)
            lock = sys.modules.get("kit.results.lock")
            if lock is not None:
                lock.release_all()


def _a_stop(e: BaseException) -> bool:
    """Whether `e` is a stop's: a SIGTERM came while the command ran (kit.errors.stopped), or a
    KeyboardInterrupt is in its chain of causes (Ctrl-C inside an extension module's import)."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return stopped()


def _interrupted(ctx: click.Context, during: str) -> NoReturn:
    """Ctrl-C or SIGTERM: what was kept and how to go on, exit 130 (ExitCode.INTERRUPTED)."""
    where = f" during {during}" if during else ""
    hint = _hint(ctx)
    group = ctx.command
    name = ctx.meta.get("command")
    resumable = name in getattr(group, "resumable", ())
    # a stop while the command's module was imported: it had done nothing
    loaded = not name or (isinstance(group, click.Group) and name in group.commands)
    nothing_measured = not _started(hint) if hint else (resumable or not loaded)
    if nothing_measured:
        # README: a series stopped before its manifest was written measured nothing
        when = "before its first run" if resumable else "before it began"
        click.echo(f"micakit: interrupted{where}, {when}.", err=True)
        click.echo("  nothing was measured yet: the same command starts it again", err=True)
    else:
        click.echo(f"micakit: interrupted{where}; finished runs are kept.", err=True)
        if hint:
            click.echo(f"  resume with: micakit {name} --resume {hint}", err=True)
    ctx.exit(int(ExitCode.INTERRUPTED))


def _hint(ctx: click.Context) -> str | None:
    """The results directory of a command that keeps one (KitGroup.resumable): as the command
    named it (`resume_hint`, its first act), or, where the stop came before that (its module
    imported, its options read), as its command line names it (`--resume`, else `--out`)."""
    hint = ctx.meta.get("resume_hint")
    if hint or ctx.meta.get("command") not in getattr(ctx.command, "resumable", ()):
        return str(hint) if hint else None
    args: list[str] = ctx.meta.get("command_args", [])
    for flag in ("--resume", "--out"):
        named = ""
        for i, arg in enumerate(args):
            if arg == flag and i + 1 < len(args):
                named = args[i + 1]
            elif arg.startswith(flag + "="):
                named = arg[len(flag) + 1 :]
        if named:
            return named
    return None


def _usage(ctx: click.Context, e: click.UsageError) -> NoReturn:
    """Click's usage errors in the kit's form, error and fix, exit 2 (ExitCode.USER_ERROR).

    A type of the kit's may carry its own fix (options.Unusable); any other usage error points
    at the command's help, which lists every option with an example.
    """
    if isinstance(e, _SHOWS_HELP):
        raise e  # `micakit` alone: click's help, as asked
    # as the README names it, whether it ran as `micakit` or `python run.py`
    command = " ".join(["micakit", *(e.ctx or ctx).command_path.split()[1:]])
    fix = getattr(e, "fix", None) or f"`{command} --help` lists what it takes, with an example"
    message = e.format_message()
    # the kit's messages begin in lower case ("error: no such option"), click's in upper case
    _say_error(message[:1].lower() + message[1:], fix)
    ctx.exit(int(ExitCode.USER_ERROR))


_SHOWS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2 and later


def _say_error(message: str, fix: str | None) -> None:
    click.echo(f"micakit: error: {message}", err=True)
    if fix:
        click.echo(f"  fix: {fix}", err=True)


def _started(hint: str) -> bool:
    """Whether the results directory `hint` has its manifest: a directory without one never
    started, and the same command starts it again (kit.engine.engine)."""
    from kit.results.store import MANIFEST  # lazy: the store imports numpy (start-up speed)

    return (Path(hint) / MANIFEST).is_file()


def _again(ctx: click.Context) -> str | None:
    """What goes on after a stop the user fixed: `--resume`, or the same command again."""
    hint = _hint(ctx)
    if not hint:
        return None
    if _started(hint):
        return f"`micakit {ctx.meta.get('command')} --resume {hint}`"
    return "run the same command again (nothing was measured yet)"
