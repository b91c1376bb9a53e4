"""Starting and stopping the web front end as a background process (for ``elowen up``,
``elowen down`` and ``elowen web``).

The web process is one more :class:`elowen.cli.daemonctl.Service`: started detached with
``python -m elowen.web`` and the CLI's environment (so it finds the daemon the same way the
CLI does: ``ELOWEN_URL`` or ``ELOWEN_HOST``/``ELOWEN_PORT``), ready when its ``/health``
answers. Files in ``$ELOWEN_HOME``: ``web.pid`` (written by the process), ``logs/web.log``
(its own rotating log) and ``logs/web.out`` (its stdout/stderr).

Stdlib only (with the CLI's own modules): the CLI imports this on its start path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from elowen.cli import daemonctl
from elowen.cli.config import Config

__all__ = ["WEB", "start", "status", "stop", "web_url"]


def web_url(environ: Mapping[str, str] | None = None) -> str:
    """The web front end's base URL: ``http://$ELOWEN_WEB_HOST:$ELOWEN_WEB_PORT`` (defaults
    ``127.0.0.1`` and ``4500``)."""
    env = os.environ if environ is None else environ
    return f"http://{env.get('ELOWEN_WEB_HOST') or '127.0.0.1'}:{env.get('ELOWEN_WEB_PORT') or 4500}"


WEB = daemonctl.Service("web", "elowen.web", lambda cfg: web_url())
"""The web front end as a service (pid file ``web.pid``, log ``logs/web.log``)."""


def start(cfg: Config, *, timeout: float = daemonctl.START_TIMEOUT, progress: Callable[[str], None] | None = None) -> daemonctl.Status:
    """Start the web front end detached unless it already answers; wait for ``/health``.

    Raises:
        daemonctl.ControlError: it exited early or did not answer within ``timeout`` seconds.
    """
    return daemonctl.start(WEB, cfg, timeout=timeout, progress=progress)


def stop(cfg: Config, *, timeout: float = daemonctl.STOP_TIMEOUT, force: bool = False) -> int | None:
    """Stop it (SIGTERM, then SIGKILL with ``force``); the pid stopped, or ``None``.

    Raises:
        daemonctl.ControlError: it did not stop, or the pid file names another program.
    """
    return daemonctl.stop(WEB, cfg, timeout=timeout, force=force)


def status(cfg: Config) -> daemonctl.Status:
    """Whether it answers ``/health``, with its pid and URL."""
    return daemonctl.status(WEB, cfg)
