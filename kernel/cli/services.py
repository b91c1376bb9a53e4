"""``elowen daemon start|stop|status|logs|reset-admin-token``, ``elowen web
[start|stop|status|logs]`` and ``elowen up`` / ``elowen down`` (the daemon, then the web front
end).

Exit statuses: a service that cannot be started (its port is used by another Elowen home's
daemon or by something that is not Elowen, a second instance, a crash while starting) is 3,
like a daemon that cannot be reached; a failed stop is 1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from elowen.web.launch import WEB

from . import agentserver, daemonctl
from .app import App
from .daemonctl import DAEMON, SERVICES, Service
from .errors import ControlError, Failure
from .output import echo_json, note

__all__ = ["daemon", "down", "up", "web"]

#: What ``elowen up`` starts (in order) and ``elowen down`` stops (in reverse).
ALL: tuple[Service, ...] = (*SERVICES, WEB)


#: Exit status when a service cannot be started (docs/cli.md, "Exit statuses").
START_FAILED = 3


def _start(app: App, services: tuple[Service, ...], foreground: bool) -> None:
    if foreground:
        try:
            code = daemonctl.run_foreground(services, app.cfg, notify=note)
        except ControlError as exc:
            raise Failure(str(exc), START_FAILED) from None
        raise SystemExit(code)
    for service in services:
        try:
            st = daemonctl.start(service, app.cfg, progress=note)
        except ControlError as exc:
            raise Failure(str(exc), START_FAILED) from None
        click.echo(f"{service.name}: running (pid {st.pid}) at {st.url}")


def _stop(app: App, services: tuple[Service, ...], timeout: float, force: bool, *, end_agents: bool = False) -> None:
    for service in reversed(services):
        try:
            pid = daemonctl.stop(service, app.cfg, timeout=timeout, force=force)
        except ControlError as exc:
            raise Failure(str(exc), 1) from None
        click.echo(f"{service.name}: stopped (pid {pid})" if pid else f"{service.name}: not running")
        if service is DAEMON:
            _settle_agent_server(app, end_agents=end_agents)


def _settle_agent_server(app: App, *, end_agents: bool) -> None:
    """After the daemon stopped: end the home's tmux server when it holds no agent (or when
    ``end_agents``), else keep it and say so."""
    state = agentserver.server_state(app.cfg.home)
    if not state.running:
        return
    if state.agents and not end_agents:
        click.echo(
            f"agents: {len(state.agents)} still running in tmux server -L {state.socket} "
            f"({', '.join(state.agents)}); re-adopted at the next start; `elowen down --agents` ends them"
        )
        return
    agentserver.end_server(state.socket)
    if state.agents:
        click.echo(f"agents: ended {len(state.agents)} ({', '.join(state.agents)}) and tmux server -L {state.socket}")


foreground_option = click.option("--foreground", is_flag=True, help="Run attached to this terminal until Ctrl-C.")


def stop_options(fn: Any) -> Any:
    """``--timeout S`` (seconds after SIGTERM) and ``--force`` (SIGKILL after it)."""
    fn = click.option("--force", is_flag=True, help="Send SIGKILL if it is still running after the timeout.")(fn)
    return click.option("--timeout", type=click.FloatRange(min=0.1), default=daemonctl.STOP_TIMEOUT, show_default=True, help="Seconds to wait after SIGTERM.")(
        fn
    )


@click.group()
def daemon() -> None:
    """Run and inspect the Elowen daemon."""


@daemon.command("start")
@foreground_option
@click.option("--safe", is_flag=True, help="safe mode: plugins that failed (or hung the start) last time stay off")
@click.pass_obj
def daemon_start(app: App, foreground: bool, safe: bool) -> None:
    """Start the daemon (detached, logging to $ELOWEN_HOME/logs/daemon.log) unless it runs.
    With --safe, plugins that failed last time stay off (docs/operations.md, "Safe mode")."""
    if safe:
        os.environ["ELOWEN_SAFE"] = "1"  # read by the daemon process (python -m elowen.daemon)
    _start(app, (DAEMON,), foreground)


@daemon.command("stop")
@stop_options
@click.pass_obj
def daemon_stop(app: App, timeout: float, force: bool) -> None:
    """Stop the daemon (SIGTERM to the pid in $ELOWEN_HOME/daemon.pid) and wait for it."""
    _stop(app, (DAEMON,), timeout, force)


@daemon.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_obj
def daemon_status(app: App, as_json: bool) -> None:
    """Say whether the daemon answers; exit status 3 when it does not."""
    st = daemonctl.status(DAEMON, app.cfg)
    if as_json:
        echo_json(st.to_dict())
    elif st.running:
        click.echo(f"daemon: running (pid {st.pid}, version {st.version or '?'}) at {st.url}")
    elif st.conflict:
        click.echo(f"daemon: not running at {st.url}: {st.conflict}")
    else:
        pid_note = f" (pid {st.pid} exists but does not answer)" if st.pid else ""
        click.echo(f"daemon: not running at {st.url}{pid_note}; log: {st.log}")
    if not st.running:
        raise SystemExit(3)


@daemon.command("logs")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("-n", "--lines", type=click.IntRange(min=0), default=50, show_default=True, help="How many last lines to print.")
@click.pass_obj
def daemon_logs(app: App, follow: bool, lines: int) -> None:
    """Print the daemon's log file (the output of a detached daemon)."""
    path = DAEMON.log_file(app.cfg)
    try:
        daemonctl.tail(path, lines, follow=follow, write=click.echo)
    except FileNotFoundError:
        raise Failure(f"no log file at {path} (the daemon was never started detached from this home)", 1) from None


@daemon.command("reset-admin-token")
@click.option("--user", "user_name", default=None, help="The admin to issue the token for [default: 'admin', else the first admin].")
@click.option("--keep-old", is_flag=True, help="Keep that admin's other tokens (default: revoke them).")
@click.pass_obj
def daemon_reset_admin_token(app: App, user_name: str | None, keep_old: bool) -> None:
    """Issue a new admin token straight in $ELOWEN_HOME's database (no API, no token needed;
    for a lost admin.token) and write it to $ELOWEN_HOME/admin.token (mode 0600).

    Needs read and write access to $ELOWEN_HOME; works whether the daemon runs or not.
    """
    from elowen.daemon.recovery import RecoveryError, reset_admin_token  # heavy: only here

    try:
        db = os.environ.get("ELOWEN_DB") or None
        result = reset_admin_token(app.cfg.home, Path(db).expanduser() if db else None, user=user_name, keep_old=keep_old)
    except RecoveryError as exc:
        raise Failure(str(exc), 1) from None
    except OSError as exc:
        raise Failure(f"cannot use {app.cfg.home}: {exc.strerror or exc} (run this as the user who owns ELOWEN_HOME)", 1) from None
    revoked = f"; revoked {result.revoked} older token(s)" if result.revoked else ""
    click.echo(f"wrote a new token for admin {result.name!r} to {result.path}{revoked}")
    if app.cfg.explicit_token:
        note("note: ELOWEN_TOKEN is set and wins over the token file; unset it to use the new token")


@click.command()
@foreground_option
@click.pass_obj
def up(app: App, foreground: bool) -> None:
    """Start everything Elowen runs: the daemon, then the web front end."""
    _start(app, ALL, foreground)


@click.command()
@click.option("--timeout", type=click.FloatRange(min=0.1), default=daemonctl.STOP_TIMEOUT, show_default=True, help="Seconds to wait for each process.")
@click.option("--force", is_flag=True, help="Send SIGKILL to what is still running after the timeout.")
@click.option("--agents", "end_agents", is_flag=True, help="Also end the coding agents still running in the home's tmux server.")
@click.pass_obj
def down(app: App, timeout: float, force: bool, end_agents: bool) -> None:
    """Stop everything Elowen runs, in reverse start order. Agents keep running in the home's
    tmux server (re-adopted at the next start) unless --agents is given; a server with no
    agent is ended."""
    _stop(app, ALL, timeout, force, end_agents=end_agents)


@click.group(invoke_without_command=True)
@foreground_option
@click.pass_context
def web(ctx: click.Context, foreground: bool) -> None:
    """Run the web front end alone (ELOWEN_WEB_PORT, default 4500); bare `elowen web` starts it."""
    if ctx.invoked_subcommand is None:
        _start(ctx.obj, (WEB,), foreground)


@web.command("start")
@foreground_option
@click.pass_obj
def web_start(app: App, foreground: bool) -> None:
    """Start the web front end (detached, logging to $ELOWEN_HOME/logs/web.log) unless it runs."""
    _start(app, (WEB,), foreground)


@web.command("stop")
@stop_options
@click.pass_obj
def web_stop(app: App, timeout: float, force: bool) -> None:
    """Stop the web front end (SIGTERM to the pid in $ELOWEN_HOME/web.pid)."""
    _stop(app, (WEB,), timeout, force)


@web.command("status")
@click.pass_obj
def web_status(app: App) -> None:
    """Say whether the web front end answers; exit status 3 when it does not."""
    st = daemonctl.status(WEB, app.cfg)
    click.echo(f"web: running (pid {st.pid}) at {st.url}" if st.running else f"web: not running at {st.url}; log: {st.log}")
    if not st.running:
        raise SystemExit(3)


@web.command("logs")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("-n", "--lines", type=click.IntRange(min=0), default=50, show_default=True, help="How many last lines to print.")
@click.pass_obj
def web_logs(app: App, follow: bool, lines: int) -> None:
    """Print the web front end's log file."""
    path = WEB.log_file(app.cfg)
    try:
        daemonctl.tail(path, lines, follow=follow, write=click.echo)
    except FileNotFoundError:
        raise Failure(f"no log file at {path} (the web front end was never started from this home)", 1) from None
