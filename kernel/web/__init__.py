"""Elowen's web front end: a backend-for-frontend (BFF) process.

The browser talks only to this quart-trio process (``python -m elowen.web``, default
``127.0.0.1:4500``); it keeps each user's daemon token server-side, proxies REST calls to the
daemon, relays the daemon's SSE stream and agent terminals, and renders pages with Jinja and
htmx. See ``docs/web.md``.
"""
