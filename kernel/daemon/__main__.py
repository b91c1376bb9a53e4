"""``python -m elowen.daemon``: run the daemon in the foreground."""

from __future__ import annotations

from .server import main

raise SystemExit(main())
