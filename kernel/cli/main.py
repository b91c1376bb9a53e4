"""The ``elowen`` command: a thin client of the daemon's REST API.

Exit statuses: 0 success; 1 the API refused the request (``error: <message>`` on stderr) or
an operation failed; 2 usage or configuration error; 3 the daemon cannot be reached (with a
hint); 130 interrupted.

Start-up is kept light: only click and the stdlib are imported on this path (no trio, quart,
httpx, pydantic or mcp); ``tests/cli/test_imports.py`` pins that.
"""

from __future__ import annotations

from typing import Any

import click

from . import daemonctl
from .app import App, Failure
from .client import ApiError, Unreachable
from .config import load_config

__all__ = ["cli", "main"]


class _Group(click.Group):
    """The root group: turns expected failures into ``error: …`` lines and exit statuses."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            raise Failure(exc.message or exc.code, 1) from None
        except Unreachable as exc:
            raise Failure(f"{exc}\n{_unreachable_hint(ctx)}", 3) from None
        except daemonctl.ControlError as exc:
            raise Failure(str(exc), 3 if isinstance(ctx.obj, App) and ctx.obj.autostarting else 1) from None


def _unreachable_hint(ctx: click.Context) -> str:
    app = ctx.obj if isinstance(ctx.obj, App) else None
    if app is not None and not app.cfg.autostart:
        return "hint: check ELOWEN_URL, or start the daemon there (`elowen daemon start`)"
    log = daemonctl.DAEMON.log_file(app.cfg) if app else "the daemon log"
    return f"hint: `elowen daemon start`, then `elowen daemon logs` (log: {log})"


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="elowen", prog_name="elowen", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Elowen: a self-hosted personal AI agent that supervises coding-agent CLIs.

    This command talks to the Elowen daemon (ELOWEN_URL, default http://127.0.0.1:4400) and
    starts it if nothing is listening. Authentication: ELOWEN_TOKEN, or the admin token the
    daemon wrote to $ELOWEN_HOME/admin.token.
    """
    try:
        cfg = load_config()
    except ValueError as exc:
        raise Failure(str(exc), 2) from None
    ctx.obj = App(cfg)


def _register() -> None:
    from .events import events
    from .plugins import plugin
    from .projects import project
    from .services import daemon, down, up
    from .tasks import close, task
    from .users import user

    for command in (daemon, up, down, task, close, project, user, events, plugin):
        cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point (``elowen = "elowen.cli.main:main"``)."""
    cli.main(prog_name="elowen")
