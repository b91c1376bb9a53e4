"""Plugin route paths are checked at registration: a path that does not start with ``/`` (it
would land in another plugin's ``/plugins/<name>`` space), or holds ``..``, ``//`` or characters
the router does not match, is refused with a warning and an audit row; the plugin's other
routes are served as usual."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from elowen.core.contributions import route_path_error
from elowen.daemon.plugin_routes import _compile
from elowen_sdk import Route, WebSocketRoute
from elowen_sdk.testing import plugin_kernel

BAD = ["noslash", "2/x", "/a/../b", "/..", "/a//b", "/a/", "/a b", "/a?x=1", "/a%2Fb", "/{1x}", "/x{id}", ""]
GOOD = ["/", "/notes", "/notes/{id}", "/notes/{id}/tags", "/v1.2/a_b-c~d"]

PLUGIN = """
from elowen_sdk import Route, WebSocketRoute, hookimpl

PATHS = {paths!r}

@hookimpl
def register_routes(register):
    for p in PATHS:
        register(Route(method="GET", path=p, handler=lambda request: {{"ok": True}}))
    register(WebSocketRoute(path="ws/../x", handler=lambda ws: None))
"""


def make_plugin(root: Path, name: str, paths: list[str]) -> str:
    """Write an importable plugin package ``<name>_pkg`` under ``root``; returns the module."""
    pkg = root / f"{name}_pkg_{uuid.uuid4().hex[:6]}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(PLUGIN.format(paths=paths))
    routes = json.dumps([f"GET {p}" for p in paths] + ["WS ws/../x"])
    (pkg / "elowen-plugin.toml").write_text(f'name = "{name}"\nversion = "1.0.0"\napi = "1"\nentry = "{pkg.name}.plugin"\n\n[contributes]\nroutes = {routes}\n')
    return f"{pkg.name}.plugin"


@pytest.mark.parametrize("path", BAD)
def test_bad_paths_are_named(path):
    assert route_path_error(path) is not None


@pytest.mark.parametrize("path", GOOD)
def test_good_paths_pass(path):
    assert route_path_error(path) is None


def test_mount_is_under_the_plugin_prefix():
    route = Route(method="GET", path="/notes/{id}", handler=lambda request: None)
    compiled = _compile("exp", route, builtin=False)
    assert compiled.mount == "/plugins/exp/notes/{id}"
    assert compiled.pattern.match("/plugins/exp/notes/7").groupdict() == {"id": "7"}
    assert compiled.pattern.match("/plugins/exp2/notes/7") is None


async def test_bad_route_paths_are_refused_at_registration(tmp_path):
    sys.path.insert(0, str(tmp_path))
    try:
        module = make_plugin(tmp_path, "exp", ["/ok", "noslash", "2/x", "/a/../b", "/a//b"])
        async with plugin_kernel(tmp_path, enable=["exp"], modules=[module], entry_points=False) as kernel:
            assert kernel.registry.get("exp").state == "enabled"
            routes = {name: owned.plugin for name, owned in kernel.contributions.all("route").items()}
            assert routes == {"GET /plugins/exp/ok": "exp"}  # named by the mounted path
            kernel.store.flush_audit()
            rows = kernel.store.query("SELECT actor, target, outcome, detail FROM audit WHERE action = 'register.route' ORDER BY id")
            assert [(r["actor"], r["target"], r["outcome"]) for r in rows] == [
                ("exp", "GET noslash", "invalid"),
                ("exp", "GET 2/x", "invalid"),
                ("exp", "GET /a/../b", "invalid"),
                ("exp", "GET /a//b", "invalid"),
                ("exp", "WS ws/../x", "invalid"),
            ]
            assert "must start with '/'" in json.loads(rows[0]["detail"])["error"]
    finally:
        sys.path.remove(str(tmp_path))


def test_websocket_route_paths_are_checked_too():
    assert route_path_error(WebSocketRoute(path="ws", handler=lambda ws: None).path) is not None
