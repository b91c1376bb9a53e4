"""The REST handlers against bad input: every odd body, query and path parameter is answered
with a 4xx ``HTTPError`` (never another exception, which the daemon would turn into a 500), and
agent tokens are refused. Handlers are called with real ``Request`` objects over the real
kernel (the HTTP path itself is covered by test_web.py)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from elowen_sdk import HTTPError, Principal, Request
from tests.notify.conftest import world

ODD: list[Any] = [
    None,
    0,
    -1,
    "",
    "x" * 3000,
    [],
    {},
    {"kinds": []},
    {"kinds": {"cron": {"push": "no"}}},
    {"endpoint": 5, "keys": "k"},
    {"keys": {"p256dh": 1}},
]
QUERIES: list[dict[str, str]] = [
    {},
    {"limit": "0"},
    {"limit": "abc"},
    {"limit": "501"},
    {"limit": "²"},
    {"cursor": "!!"},
    {"kind": "nope"},
    {"status": "weird"},
    {"unread": "1"},
]
PARAMS: list[dict[str, str]] = [{"id": "1"}, {"id": "abc"}, {"id": "-1"}, {"id": "99999999999999999999"}, {"id": "²"}]


async def test_no_input_makes_a_handler_crash(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        ada = w.user("ada")
        me = Principal(ada, "ada", "member", project_ids=frozenset())
        routes = {name: owned.obj for name, owned in w.kernel.contributions.all("route").items() if owned.plugin == "notify"}
        assert len(routes) == 13
        answered = 0
        for (name, route), body, query, params in itertools.product(routes.items(), ODD, QUERIES, PARAMS):
            req = Request(route.method, route.path, params, query, body, me)
            try:
                await _handle(route, req)
            except HTTPError as exc:
                assert 400 <= exc.status < 500, (name, body, query, params, exc.status)
            answered += 1
        assert answered == 13 * len(ODD) * len(QUERIES) * len(PARAMS)


async def _handle(route: Any, req: Request) -> Any:
    result = route.handler(req)
    if hasattr(result, "__await__"):
        result = await result
    return result


async def test_agent_tokens_are_refused(tmp_path: Path) -> None:
    async with world(tmp_path) as w:
        ada = w.user("ada")
        agent = Principal(ada, "agent:task:1", "member", scope="agent", task_id=1)
        route = w.kernel.contributions.get("route", "GET /notifications").obj
        with pytest.raises(HTTPError) as err:
            await _handle(route, Request("GET", "/notifications", {}, {}, None, agent))
        assert err.value.status == 403
