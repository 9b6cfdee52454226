"""The ``vnuma`` command line: parse, call a service, print. Kept thin.

Settings (``--db``, the ``VNUMA_*`` variables, the configuration file:
:mod:`vnuma.services.config`) are read here once and passed down. One handler maps every :class:`VnumaError`
to ``error: ...`` (+ ``hint: ...``) on stderr and its exit code; anything
else is a bug: exit 70. ``--debug`` prints the traceback first and keeps
the exit code. A reader that
closes the pipe early (``vnuma stats --json | head``) ends the command
quietly with exit 141, what a shell reports for a writer killed by SIGPIPE:
no message, and the closed stream is pointed at /dev/null so that Python's
flush at exit has nothing to complain about. Python ignores SIGPIPE and we
keep it so (restoring its default would also kill vnuma when a libvirt or
PostgreSQL socket closes); the handler checks that the broken pipe is really
stdout or stderr, and any other ``BrokenPipeError`` stays a bug. Heavy
libraries (SQLAlchemy, libvirt, Jinja) are imported only by the commands
that use them. numpy's OpenBLAS starts one thread per core when imported and
vnuma multiplies no matrices: the CLI (and the serving processes it starts)
keeps it to one (``OPENBLAS_NUM_THREADS``, unless set), which saves a placing
process about a fifth of its CPU time.
"""

from __future__ import annotations

import os
import select
import sys
import traceback
from importlib import import_module
from typing import Annotated, Any, NoReturn, TextIO

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from vnuma.cli.arguments import UsageArgument
from vnuma.errors import HypervisorError, InventoryError, VnumaError

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before any command imports numpy (see above)

EXIT_INTERNAL = 70
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, as the shell reports `yes | head`
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as the shell reports a command stopped by Ctrl-C


class _Group(TyperGroup):
    def list_commands(self, ctx: typer.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(_load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        ctx.meta["vnuma_argv"] = list(args)  # the command line as given, for the audit log
        return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context) -> Any:
        from vnuma.services import audit, interrupts

        audit.begin(ctx.meta.get("vnuma_argv", sys.argv[1:]))
        try:
            result = super().invoke(ctx)
            interrupts.completed()  # its output is out: a Ctrl-C from here on cannot undo it
            return result
        except VnumaError as err:
            if _debug(ctx):
                _traceback(err)
            message = " ".join(str(err).split("\n"))
            _complain(f"error: {message}" + (f"\nhint: {err.hint}" if err.hint else ""))
            failed = isinstance(err, (HypervisorError, InventoryError))
            _log_outcome(ctx, "failed" if failed else "refused", message, err)
            raise typer.Exit(err.exit_code) from err
        except (typer.Exit, typer.Abort, typer.TyperException, SystemExit):
            # Usage errors (a badly typed option) surface while a sub-command
            # parses: Click prints them and exits 2.
            raise
        except KeyboardInterrupt:
            with interrupts.held():  # a second Ctrl-C does not cut the account short
                said = _interrupted(ctx)
                _complain(f"error: {said.message}" + (f"\nhint: {said.hint}" if said.hint else ""))
                _log_outcome(ctx, "failed", said.message)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError as err:
            if _silence_closed_streams():
                raise typer.Exit(EXIT_CLOSED_PIPE) from None
            _internal_error(ctx, err)
        except Exception as err:
            _internal_error(ctx, err)
        finally:
            if interrupts.late():
                _complain(f"note: {_late(ctx)}")
            audit.end()
            client = (ctx.obj or {}).get("client") if isinstance(ctx.obj, dict) else None
            if client is not None:
                client.close()


def _interrupted(ctx: typer.Context) -> Any:
    """What a command stopped by Ctrl-C had done (:func:`vnuma.services.interrupts.what_was_done`); a command
    that only reads, or one whose inventory cannot be read, says only that it was interrupted."""
    from vnuma.services.interrupts import Said, what_was_done

    if tuple(_PARAMS.get("path", ())) in READ_ONLY or _server_url() is not None:
        return Said("interrupted")
    try:
        return what_was_done(settings(ctx))
    except VnumaError:
        return Said("interrupted", "what it had changed could not be read: `vnuma log` shows it")


def _late(ctx: typer.Context) -> str:
    """The note of a command that finished although Ctrl-C came once its change was committed."""
    from vnuma.services.interrupts import what_was_done

    try:
        done = what_was_done(settings(ctx)).message.removeprefix("interrupted ")
    except VnumaError:
        done = "its change was committed"
    return f"interrupted {done}: the command finished (exit 0)"


def _internal_error(ctx: typer.Context, err: Exception) -> NoReturn:
    if _debug(ctx):
        _traceback(err)
    _complain(f"error: internal error (bug): {type(err).__name__}: {err}; rerun with --debug")
    _log_outcome(ctx, "failed", f"internal error: {type(err).__name__}: {err}")
    raise typer.Exit(EXIT_INTERNAL) from err


READ_ONLY = {
    ("capacity",), ("config", "show"), ("db", "status"), ("host", "list"), ("host", "show"), ("log",),
    ("render",), ("simulate",), ("stats",), ("tenant", "list"), ("tenant", "show"), ("trace", "export"),
    ("trace", "generate"), ("trace", "list"), ("token", "list"), ("serve",), ("vm", "guest-view"), ("vm", "list"),
    ("vm", "show"),
}
"""Commands that never change the inventory: their refusals are not logged (`rebalance` without --apply and
any --dry-run neither)."""
_PARAMS: dict[str, Any] = {}
"""The running command's path and parameters (kept by :func:`_remembering`), for the audit log."""


REMOTE = {
    ("apply",), ("capacity",), ("device", "clean"), ("device", "list"), ("device", "set"), ("device", "taint"),
    ("device", "untaint"), ("host", "set"), ("host", "add"), ("host", "cordon"), ("host", "drain"), ("host", "import"),
    ("host", "list"), ("host", "refresh"), ("host", "remove"), ("host", "reserve"), ("host", "show"),
    ("host", "uncordon"), ("log",), ("place",), ("rebalance",), ("render",), ("stats",), ("tenant", "create"),
    ("tenant", "list"), ("tenant", "remove"), ("tenant", "show"), ("tenant", "update"), ("token", "create"),
    ("token", "list"), ("token", "revoke"), ("vm", "guest-view"), ("vm", "list"), ("vm", "migrate"),
    ("vm", "release"), ("vm", "repin"), ("vm", "show"), ("vm", "start"), ("vm", "stop"),
}
"""Commands that run through a service (``--server``): those the HTTP API serves."""


_GIVEN: dict[str, Any] = {}
"""The running command's --server (set by the root callback: one command runs at a time)."""


def _server_url() -> str | None:
    return _GIVEN.get("server") or os.environ.get("VNUMA_SERVER") or None


def remote(ctx: typer.Context) -> Any:
    """The service to send this command to (``--server URL`` or ``VNUMA_SERVER``, bearer ``VNUMA_TOKEN``), or
    None to open the inventory."""
    url = _server_url()
    if url is None:
        return None
    root = ctx.find_root()
    if "client" not in root.obj:
        from vnuma.api.client import Client

        root.obj["client"] = Client(url, os.environ.get("VNUMA_TOKEN"))
    return root.obj["client"]


def _log_outcome(ctx: typer.Context, outcome: str, error: str, cause: VnumaError | None = None) -> None:
    """Log a refused or failed invocation of a command that changes the inventory (best effort), ``cause`` its error."""
    path = tuple(_PARAMS.get("path", ()))
    params = _PARAMS.get("params", {})
    argv = ctx.meta.get("vnuma_argv", sys.argv[1:])
    if not path or path in READ_ONLY or "--dry-run" in argv or (path == ("rebalance",) and "--apply" not in argv):
        return
    if _server_url() is not None:
        return  # the service logs what its requests were refused
    named = params.get("name")
    subjects = {
        "vm": params.get("vm") or (named if path == ("place",) else None),
        "host": named if path[0] == "host" else params.get("host") or params.get("to"),
        "tenant": named if path[0] == "tenant" else params.get("tenant"),
    }
    said = {k: v for k, v in subjects.items() if isinstance(v, str)}
    try:
        from vnuma.services import audit

        audit.log_outcome(settings(ctx), outcome, error, said, cause=cause)
    except VnumaError:
        pass  # no inventory to log into (a bad --db, a broken configuration): nothing was changed there


def _traceback(err: BaseException) -> None:
    """``--debug``: the traceback on stderr; the error line and its exit code follow as without it."""
    try:
        traceback.print_exception(err, file=sys.stderr)
    except BrokenPipeError:
        _silence_closed_streams()


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
    add_completion=True,  # --install-completion / --show-completion; names come from vnuma.cli.completion
    rich_markup_mode=None,
    help="NUMA-aware placement of tenant VMs on libvirt hypervisors.",
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"vnuma {version('vnuma')}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option("--db", metavar="URL", help="Inventory: SQLAlchemy URL or SQLite file path [env VNUMA_DB]."),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    create: Annotated[
        bool,
        typer.Option(
            "--create", help="Create the inventory file --db/VNUMA_DB names if it does not exist (refused otherwise)."
        ),
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print vnuma's version.")
    ] = False,
    server: Annotated[
        str | None,
        typer.Option("--server", metavar="URL", help="Send the command to a `vnuma serve` at URL instead of "
                     "opening the inventory [env VNUMA_SERVER; token: env VNUMA_TOKEN]."),
    ] = None,
) -> None:
    """NUMA-aware placement of tenant VMs on libvirt hypervisors."""
    ctx.obj = {"db": db, "create": create}
    _GIVEN["server"] = server


def config(ctx: typer.Context) -> Any:
    """The site configuration (:mod:`vnuma.services.config`), read once per command; its warnings
    (unknown keys) go to stderr once."""
    root = ctx.find_root()
    if root.obj is None:
        root.obj = {}
    if "config" not in root.obj:
        from vnuma.services.config import load

        loaded = load(os.environ, {"database": root.obj.get("db")})
        for warning in loaded.warnings:
            _complain(f"warning: {warning}")
        root.obj["config"] = loaded
    return root.obj["config"]


def settings(ctx: typer.Context) -> Any:
    """Resolve the settings once, from the global options, the environment and the configuration file."""
    from vnuma.services import make_settings

    root = ctx.find_root().obj or {}
    # `db upgrade` creates the inventory; `db status` reads a missing file as a new one, creating nothing.
    creates = ctx.command_path.split()[-2:] in (["db", "upgrade"], ["db", "status"])
    create = bool(root.get("create")) or creates
    return make_settings(root.get("db"), os.environ, create=create, config=config(ctx))


# The command tree, loaded lazily: a command imports and builds only what it runs (building
# every command took ~0.06 s of each `vnuma place`); `vnuma --help` builds them all.
# name -> (module, attribute, help): a help text marks a sub-app (a group), None a command.
COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "host": ("vnuma.cli.hosts", "app", "Inventory of hosts: discover, import, show, reserve, set, cordon, drain."),
    "tenant": ("vnuma.cli.tenants", "app", "Tenants: isolation level and quotas."),
    "device": ("vnuma.cli.devices", "app", "Device states: taint, untaint, clean, set, list."),
    "place": ("vnuma.cli.placing", "place", None),
    "vm": ("vnuma.cli.vms", "app", "VMs: list, show, guest-view, start, stop, undefine, release, repin, migrate."),
    "simulate": ("vnuma.cli.simulating", "simulate", None),
    "trace": ("vnuma.cli.traces", "app", "Workload traces: the example scenarios, generate one, export the inventory."),
    "render": ("vnuma.cli.applying", "render", None),
    "apply": ("vnuma.cli.applying", "apply", None),
    "stats": ("vnuma.cli.stats", "stats", None),
    "watch": ("vnuma.cli.watching", "watch", None),
    "events": ("vnuma.cli.watching", "events_app", "List what `vnuma watch` detected; carry a proposal out."),
    "capacity": ("vnuma.cli.capacity", "capacity", None),
    "rebalance": ("vnuma.cli.rebalancing", "rebalance", None),
    "reconcile": ("vnuma.cli.reconciling", "reconcile", None),
    "db": ("vnuma.cli.db", "app", "Inventory database: status and upgrade."),
    "log": ("vnuma.cli.auditlog", "log", None),
    "config": ("vnuma.cli.configuring", "app", "Site configuration: the effective settings and where each comes from."),
    "serve": ("vnuma.cli.serving", "serve", None),
    "token": ("vnuma.cli.tokens", "app", "Bearer tokens of the HTTP API (vnuma serve): create, list, revoke."),
    "gpu-profile": ("vnuma.cli.gpuprofiles", "app", "MIG geometries by GPU model: import, list, show, remove."),
}


def _load(name: str) -> TyperCommand | TyperGroup:
    """Import and build the top-level command ``name``."""
    module, attribute, help_text = COMMANDS[name]
    target = getattr(import_module(module), attribute)
    if help_text is None:
        sub = typer.Typer(rich_markup_mode=None, add_completion=False, pretty_exceptions_enable=False)
        sub.command(name)(target)
    else:
        sub = target
        sub.rich_markup_mode = None
    command = typer.main.get_command(sub)
    _remembering(command, (name,))
    command.name = name
    if help_text is not None and not command.help:
        command.help = help_text  # a group whose callback has a docstring (events) keeps it
    return command


def _remembering(command: TyperCommand | TyperGroup, path: tuple[str, ...]) -> None:
    """Make each leaf command of ``command`` note its path and parameters in :data:`_PARAMS` when it runs (and
    show its arguments as :class:`UsageArgument` does)."""
    if isinstance(command, TyperGroup):
        for sub_name, sub in command.commands.items():
            _remembering(sub, (*path, sub_name))
        if not command.invoke_without_command:
            return  # a group that only leads to its commands (a callback that runs alone is one: events)
    for param in command.params:
        if type(param) is TyperArgument:
            param.__class__ = UsageArgument  # the same object, its usage words only
    callback = command.callback
    if callback is None:
        return

    def run(*args: Any, **kwargs: Any) -> Any:
        _PARAMS.update(path=path, params=kwargs)
        if path not in REMOTE and _server_url() is not None:
            from vnuma.errors import InvalidInputError

            raise InvalidInputError(
                f"`vnuma {' '.join(path)}` does not run through --server",
                hint="run it where the inventory is (commands that do: "
                + ", ".join(" ".join(p) for p in sorted(REMOTE)) + ")",
            )
        return callback(*args, **kwargs)

    command.callback = run


def main() -> None:
    """Console-script entry point."""
    from vnuma.services.interrupts import own_process

    own_process()
    app(prog_name="vnuma")
