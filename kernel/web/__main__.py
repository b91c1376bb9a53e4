"""``python -m elowen.web``: run the web front end in the foreground."""

from __future__ import annotations

from .server import main

raise SystemExit(main())
