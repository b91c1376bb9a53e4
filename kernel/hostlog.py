"""Logging set-up shared by Elowen's host processes (the daemon and the web front end)."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = ["setup_logging"]


def setup_logging(home: Path, name: str, level: str = "INFO", *, quiet: Iterable[str] = ()) -> Path:
    """Log to ``home/logs/<name>.log`` (rotating, 5 MiB × 3) and stderr; the loggers in
    ``quiet`` only at WARNING and above. Returns the log file."""
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = logs / f"{name}.log"
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    file_handler = logging.handlers.RotatingFileHandler(path, maxBytes=5 * 1024 * 1024, backupCount=3, encoding="utf-8")
    file_handler.setFormatter(fmt)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(fmt)
    root = logging.getLogger()
    root.handlers[:] = [file_handler, stderr]
    root.setLevel(level.upper())
    for logger in quiet:
        logging.getLogger(logger).setLevel(logging.WARNING)
    return path
