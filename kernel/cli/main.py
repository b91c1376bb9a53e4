"""The ``elowen`` command: a thin client of the daemon's REST API.

Exit statuses: 0 success; 1 the API refused the request (``error: <message>`` on stderr) or
an operation failed; 2 usage or configuration error; 3 the daemon cannot be reached (with a
hint); 130 interrupted.

Start-up is kept light: only click and the stdlib are imported on this path (no trio, quart,
httpx, pydantic or mcp); ``tests/cli/test_imports.py`` pins that.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from elowen import __version__

from .app import App
from .client import NOT_ELOWEN, ApiError, Unreachable, describe_error
from .config import load_config
from .errors import ControlError, Failure

__all__ = ["COMMANDS", "cli", "main"]

COMMANDS: dict[str, str] = {
    "daemon": "services:daemon",
    "up": "services:up",
    "down": "services:down",
    "web": "services:web",
    "task": "tasks:task",
    "close": "tasks:close",
    "project": "projects:project",
    "user": "users:user",
    "events": "events:events",
    "plugin": "plugins:plugin",
    "agents": "agents:agents",
    "attach": "agents:attach",
    "decide": "agents:decide",
    "executors": "agents:executors",
    "decisions": "decisions:decisions",
    "mission": "overseer:mission",
    "overseer": "overseer:overseer",
    "escalations": "overseer:escalations",
    "ask": "overseer:ask",
    "provider": "overseer:provider",
    "chat": "chat:chat",
    "audit": "audit:audit",
    "notifications": "notifications:notifications",
    "cron": "cron:cron",
    "memory": "memory:memory",
    "mcp": "mcp:mcp",
    "platforms": "platforms:platforms",
}
"""Command name → ``module:attribute`` in this package, imported only when the command runs
(or for ``--help``), so a command pays for its own imports only."""


class _Group(click.Group):
    """The root group: loads commands lazily and turns expected failures into ``error: …``
    lines and exit statuses."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        command = getattr(importlib.import_module(f".{module}", __package__), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"elowen.cli.{module}.{attr} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            raise Failure(_api_message(ctx, exc), 3 if exc.code == NOT_ELOWEN else 1) from None
        except Unreachable as exc:
            raise Failure(f"{exc}\n{_unreachable_hint(ctx)}", 3) from None
        except ControlError as exc:
            raise Failure(str(exc), 3 if isinstance(ctx.obj, App) and ctx.obj.autostarting else 1) from None
        except KeyboardInterrupt:
            raise Failure("interrupted", 130) from None


def _api_message(ctx: click.Context, exc: ApiError) -> str:
    message = describe_error(exc)
    app = ctx.obj if isinstance(ctx.obj, App) else None
    if exc.status == 401 and app is not None:
        source = "ELOWEN_TOKEN" if app.cfg.explicit_token else str(app.cfg.token_file)
        message += f"\nhint: the token comes from {source}"
    if exc.code == NOT_ELOWEN and app is not None:
        where = "ELOWEN_URL" if app.cfg.explicit_url else "ELOWEN_HOST/ELOWEN_PORT"
        message += f"\nhint: the Elowen daemon is not what answers there; check {where} (`elowen daemon status`)"
    return message


def _unreachable_hint(ctx: click.Context) -> str:
    app = ctx.obj if isinstance(ctx.obj, App) else None
    if app is not None and app.cfg.explicit_url:
        return "hint: check ELOWEN_URL, or start the daemon there (`elowen daemon start`)"
    if app is not None and not app.cfg.autostart:
        return "hint: start the daemon (`elowen daemon start`; autostart is off), then retry"
    from .daemonctl import DAEMON  # the error path only

    log = DAEMON.log_file(app.cfg) if app else "the daemon log"
    return f"hint: `elowen daemon start`, then `elowen daemon logs` (log: {log})"


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="elowen", message="%(prog)s %(version)s")
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


def main() -> None:
    """Console-script entry point (``elowen = "elowen.cli.main:main"``)."""
    cli.main(prog_name="elowen")
