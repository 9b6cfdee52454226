"""The ``vnuma`` command line: parse, call a service, print. Kept thin.

Settings (``--db``, ``VNUMA_DB``, ``XDG_DATA_HOME``, ``VNUMA_TEMPLATES``) are
read here once and passed down. One handler maps every :class:`VnumaError`
to ``error: ...`` (+ ``hint: ...``) on stderr and its exit code; anything
else is a bug: exit 70 (``--debug`` shows the traceback). A reader that
closes the pipe early (``vnuma stats --json | head``) ends the command
quietly with exit 141, what a shell reports for a writer killed by SIGPIPE:
no message, and the closed stream is pointed at /dev/null so that Python's
flush at exit has nothing to complain about. Python ignores SIGPIPE and we
keep it so (restoring its default would also kill vnuma when a libvirt or
PostgreSQL socket closes); the handler checks that the broken pipe is really
stdout or stderr, and any other ``BrokenPipeError`` stays a bug. Heavy
libraries (SQLAlchemy, libvirt, Jinja) are imported only by the commands
that use them.
"""

from __future__ import annotations

import os
import select
import sys
from typing import Annotated, Any, NoReturn, TextIO

import typer
from typer.core import TyperGroup

from vnuma.errors import VnumaError

EXIT_INTERNAL = 70
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, as the shell reports `yes | head`


class _Group(TyperGroup):
    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except VnumaError as err:
            if _debug(ctx):
                raise
            message = " ".join(str(err).split("\n"))
            _complain(f"error: {message}" + (f"\nhint: {err.hint}" if err.hint else ""))
            raise typer.Exit(err.exit_code) from err
        except (typer.Exit, typer.Abort, typer.TyperException, SystemExit):
            # Usage errors (a badly typed option) surface while a sub-command
            # parses: Click prints them and exits 2.
            raise
        except KeyboardInterrupt:
            _complain("error: interrupted")
            raise typer.Exit(130) from None
        except BrokenPipeError as err:
            if _silence_closed_streams():
                raise typer.Exit(EXIT_CLOSED_PIPE) from None
            _internal_error(ctx, err)
        except Exception as err:
            _internal_error(ctx, err)


def _internal_error(ctx: typer.Context, err: Exception) -> NoReturn:
    if _debug(ctx):
        raise err
    _complain(f"error: internal error (bug): {type(err).__name__}: {err}; rerun with --debug")
    raise typer.Exit(EXIT_INTERNAL) from err


def _complain(text: str) -> None:
    """Print on stderr; a closed stderr leaves only the exit code to tell."""
    try:
        typer.echo(text, err=True)
    except BrokenPipeError:
        _silence_closed_streams()


def _silence_closed_streams() -> bool:
    """Point stdout/stderr at /dev/null where their reader has gone; False when neither has."""
    closed = [stream for stream in (sys.stdout, sys.stderr) if _is_closed_pipe(stream)]
    for stream in closed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    return bool(closed)


def _is_closed_pipe(stream: TextIO) -> bool:
    """Whether ``stream`` is a pipe (or socket) whose reading end is closed: poll says POLLERR/POLLHUP."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # CliRunner's buffers have no descriptor
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _debug(ctx: typer.Context) -> bool:
    root = ctx.find_root()
    return bool(root.params.get("debug"))


app = typer.Typer(
    cls=_Group,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="NUMA-aware placement of tenant VMs on libvirt hypervisors.",
)


@app.callback()
def _root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option("--db", metavar="URL", help="Inventory: SQLAlchemy URL or SQLite file path [env VNUMA_DB]."),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    """NUMA-aware placement of tenant VMs on libvirt hypervisors."""
    ctx.obj = {"db": db}


def settings(ctx: typer.Context) -> Any:
    """Resolve the settings once, from the global options and the environment."""
    from vnuma.services import make_settings

    return make_settings((ctx.find_root().obj or {}).get("db"), os.environ)


def _register() -> None:
    from vnuma.cli import applying, db, hosts, placing, rebalancing, reconciling, simulating, stats, tenants, traces

    app.add_typer(hosts.app, name="host", help="Inventory of hosts: discover, import, show, reserve.")
    app.add_typer(tenants.app, name="tenant", help="Tenants: isolation level and quotas.")
    app.command("place")(placing.place)
    app.add_typer(placing.vm_app, name="vm", help="VMs: list, show, release.")
    app.command("simulate")(simulating.simulate)
    app.add_typer(traces.app, name="trace", help="Example workload traces: list the scenarios, generate one.")
    app.command("render")(applying.render)
    app.command("apply")(applying.apply)
    app.command("stats")(stats.stats)
    app.command("rebalance")(rebalancing.rebalance)
    app.command("reconcile")(reconciling.reconcile)
    app.add_typer(db.app, name="db", help="Inventory database: status and upgrade.")


_register()


def main() -> None:
    """Console-script entry point."""
    app(prog_name="vnuma")
