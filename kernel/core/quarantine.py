"""Plugins held off at start: auto-disabled ones (persisted with their reason), and — in safe
mode — those that failed, or were being enabled when the daemon died, last time.

The state is one small JSON file, ``$ELOWEN_HOME/plugins-quarantine.json``:
``{"plugins": {name: {"kind": "auto-disabled"|"failed"|"loading", "reason", "at"}},
"unclean_starts": N}``. ``kind``:

* ``auto-disabled`` — too many hook failures; held off on every start until the plugin is
  enabled again explicitly (``elowen plugin enable NAME``).
* ``failed`` — its enable failed (import, ``on_load`` error or deadline); held off only in
  safe mode.
* ``loading`` — it was being enabled when the process died (a crash, ``kill -9`` of a hung
  start); held off only in safe mode.

Safe mode: ``elowen daemon start --safe`` (``python -m elowen.daemon --safe``), or automatic
after :data:`AUTO_SAFE_AFTER` starts in a row that did not end in a clean stop.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from .store import utc_iso

__all__ = ["AUTO_SAFE_AFTER", "FILE_NAME", "Quarantine"]

log = logging.getLogger(__name__)

FILE_NAME = "plugins-quarantine.json"
#: Starts in a row without a clean stop after which the daemon starts in safe mode by itself.
AUTO_SAFE_AFTER = 3


class Quarantine:
    """The quarantine file of one home. Every method runs on the trio thread; writes are
    atomic (a temporary file renamed) and never raise (a failure is logged)."""

    def __init__(self, home: Path, *, safe: bool = False) -> None:
        self.path = Path(home) / FILE_NAME
        self.safe = safe
        data = self._read()
        self.plugins: dict[str, dict[str, Any]] = dict(data.get("plugins", {}))
        self.unclean_starts = int(data.get("unclean_starts", 0))

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            tmp.write_text(json.dumps({"plugins": self.plugins, "unclean_starts": self.unclean_starts}, indent=1), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("cannot write %s: %s", self.path, exc)

    # -- starts ------------------------------------------------------------------------------

    def begin_start(self) -> bool:
        """Count a start (cleared by :meth:`clean_stop`); returns whether safe mode is on
        (asked for, or :data:`AUTO_SAFE_AFTER` unclean starts in a row)."""
        if self.unclean_starts >= AUTO_SAFE_AFTER and not self.safe:
            log.warning(
                "the last %d starts did not end in a clean stop: starting in safe mode (plugins that failed or were loading then stay off)", self.unclean_starts
            )
            self.safe = True
        self.unclean_starts += 1
        self.save()
        return self.safe

    def clean_stop(self) -> None:
        """The process is stopping cleanly: drop the ``loading`` marks and the start count."""
        self.plugins = {n: e for n, e in self.plugins.items() if e.get("kind") != "loading"}
        self.unclean_starts = 0
        self.save()

    # -- plugins -----------------------------------------------------------------------------

    def held(self, name: str) -> str | None:
        """Why ``name`` is held off now, or ``None``."""
        entry = self.plugins.get(name)
        if entry is None:
            return None
        kind = entry.get("kind")
        if kind == "auto-disabled":
            return f"auto-disabled at {entry.get('at')}: {entry.get('reason')}; enable it again with `elowen plugin enable {name}`"
        if self.safe:
            what = "failed" if kind == "failed" else "was loading when the daemon died"
            return f"safe mode: it {what} last time ({entry.get('reason')}); enable it with `elowen plugin enable {name}`"
        return None

    def mark(self, name: str, kind: str, reason: str) -> None:
        """Record ``name`` as ``kind`` (an ``auto-disabled`` mark is never downgraded)."""
        if kind != "auto-disabled" and self.plugins.get(name, {}).get("kind") == "auto-disabled":
            return
        self.plugins[name] = {"kind": kind, "reason": reason[:500], "at": utc_iso()}
        self.save()

    def clear(self, name: str, *, kinds: tuple[str, ...] = ("auto-disabled", "failed", "loading")) -> None:
        """Forget ``name`` (when its mark is one of ``kinds``)."""
        if self.plugins.get(name, {}).get("kind") in kinds:
            del self.plugins[name]
            self.save()
