"""``vnuma config show``: the effective settings and where each one comes from."""

from __future__ import annotations

import typer

from vnuma.cli import config, output

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.callback()
def _group() -> None:
    """Site configuration: the effective settings and where each comes from."""


@app.command("show")
def show(ctx: typer.Context, as_json: output.JsonOpt = False) -> None:
    """Print every setting the configuration file accepts: its effective value and where it came from.

    A command-line option wins over the environment variable, which wins
    over the file ($VNUMA_CONFIG, else $XDG_CONFIG_HOME/vnuma/config.toml),
    which wins over the built-in default. The file holds top-level TOML keys:
    database, libvirt_uri ({host} is the host's name), strategy, page_size,
    domain_type, memnode_mode, templates, metrics_allow (who reads vnuma
    serve's /metrics without a token); an unknown key is a warning.
    Here only --db is an option; the others are options of the commands that
    use them (place --strategy, render --domain-type...).

    JSON: {"KEY": {"value", "source": "default"|"file"|"env"|"option", "file": path or null}}.

    Example: VNUMA_STRATEGY=gpu-first vnuma config show
    """
    from vnuma.services.config import KEYS, effective

    values = effective(config(ctx))
    if as_json:
        output.echo_json({k: {"value": v.value, "source": v.source, "file": v.file} for k, v in values.items()})
        return
    output.echo_table(
        None,
        ["KEY", "VALUE", "SOURCE", "FROM"],
        [(k, v.value, v.source, v.file or (KEYS[k].env if v.source == "env" else "-")) for k, v in values.items()],
    )
