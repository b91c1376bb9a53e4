"""WCAG 2.2 AA on every page, in a real browser (Debian's chromium via Playwright) against a real
daemon and web process with real data on every page: a git project whose task has a live agent
(the fake Claude Code of ``tests/agents/fake_agent.py``) waiting on a permission prompt, a
worktree diff, tasks in every column, a member, the chat dock with no model.

- axe-core (vendored: ``tests/web/vendor/``, see its README) runs in each page at 1440×900 and
  390×844 (touch): no serious or critical violation of the WCAG 2.0/2.1/2.2 A and AA rules or
  axe's best practices.
- Beyond axe: the keyboard focus ring has ≥ 3:1 contrast against what surrounds it (WCAG 2.4.13
  wording, checked on every focusable control reached by Tab), every control is at least 24 px
  (44 px on the touch phone) in both directions, and the phone's navigation shows every
  section, Settings included, inside the screen without scrolling sideways.

``ELOWEN_WEB_SCREENSHOTS=docs/screenshots`` keeps a full-page screenshot of every page at both
sizes (``<page>-1440.png``, ``<page>-390.png``): the docs' pictures (docs/web.md).
"""

from __future__ import annotations

import json
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.mission_control.conftest import keep_screenshot
from tests.mission_control.gitrepo import commit, keep_worktrees_in, make_repo
from tests.support.waiting import wait

from .conftest import login, wait_js
from .stack import Stack

pytestmark = pytest.mark.slow

AXE = Path(__file__).resolve().parent / "vendor" / "axe-core-4.14.1.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
SIZES = {"1440": {"width": 1440, "height": 900}, "390": {"width": 390, "height": 844}}
FAILING = ("serious", "critical")


class A11yStack(Stack):
    """The web stack, its embedded model pointed at a model file that does not exist (chat has no
    model: the dock's notice is checked too) and the git plugin's worktrees in the test folder."""

    def write_config(self) -> None:
        super().write_config()
        path = self.home / "config.toml"
        config = tomllib.loads(path.read_text())
        config.setdefault("inference", {}).setdefault("providers", {})["local"] = {"kind": "local", "model_path": str(self.root / "no-such-model.gguf")}
        path.write_text(tomli_w.dumps(config))
        keep_worktrees_in(path, self.root / "worktrees")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The stack with data on every page: ``{"stack", "task" (id with a waiting prompt and a
    diff), "member" (a member's token)}``."""
    s = A11yStack(tmp_path_factory.mktemp("a11y"))
    s.write_config()
    try:
        s.start_daemon()
        s.start_web()
        repo = make_repo(s.root / "repo", {"README.md": "demo\n", "app.py": "print('one')\n"})
        with s.admin() as c:
            project = c.post("/projects", json={"name": "demo", "path": str(repo)}).json()["id"]
            task = c.post(
                "/tasks",
                json={"title": "Create the greeting file", "project_id": project, "exec": "claude:fake", "description": "Write it and list the folder."},
            ).json()
            for title, state, prio in (
                ("Plan the release", None, 0),
                ("Waiting for the key", "blocked", 1),
                ("Old chore", "closed", 3),
                ("Dropped idea", "cancelled", 4),
            ):
                t = c.post("/tasks", json={"title": title, "project_id": project, "priority": prio, "labels": ["docs", "web"]}).json()
                if state == "closed":
                    c.post(f"/tasks/{t['id']}/close", json={"summary": "done"}).raise_for_status()
                elif state == "cancelled":
                    c.post(f"/tasks/{t['id']}/cancel").raise_for_status()
                elif state:
                    c.patch(f"/tasks/{t['id']}", json={"state": state}).raise_for_status()
            made = c.post("/users", json={"name": "mia", "role": "member"}).json()
            member = made["token"]
            c.post(f"/users/{made['user']['id']}/projects", json={"project_id": project}).raise_for_status()

            def worktree() -> Any:
                r = c.get(f"/tasks/{task['id']}/worktree")
                return r.json() if r.status_code == 200 else None

            tree = wait(worktree, "the task's worktree", timeout=30)
            commit(tree["path"], {"app.py": "print('two')\n", "greeting.txt": "hello\n"}, "agent: greeting")
            wait(lambda: c.get("/decisions", params={"task": task["id"], "status": "pending"}).json()["items"], "the agent's permission prompt", timeout=30)
        yield {"stack": s, "task": task["id"], "member": member}
    finally:
        s.stop()


def open_page(browser: Any, stack: Stack, size: str, *, token: str | None = None) -> Any:
    """A new context at ``size`` (the phone one with touch), logged in with ``token`` (admin
    when ``None``; ``""``: not logged in)."""
    viewport = SIZES[size]
    if token == "":
        ctx = browser.new_context(viewport=viewport, has_touch=size == "390", is_mobile=size == "390")
        page = ctx.new_page()
        page.errors = []  # type: ignore[attr-defined]
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        return page
    if token is None:
        page = login(browser, stack, viewport["width"], viewport["height"])
        if size == "390":  # login() has no touch: log the same token in again on a touch phone
            page.context.close()
        else:
            return page
    ctx = browser.new_context(viewport=viewport, has_touch=size == "390", is_mobile=size == "390")
    page = ctx.new_page()
    page.errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(f"{stack.web_url}/login")
    page.fill("#token", token or stack.admin_token)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(f"{stack.web_url}/")
    page.wait_for_selector("#conn[data-state=live]")
    return page


def axe(page: Any) -> list[dict[str, Any]]:
    """axe-core's violations in ``page``: ``[{id, impact, help, nodes: [{target, summary}]}]``.
    The script goes in through the DevTools protocol (``evaluate``), which the page's CSP does
    not govern: the page itself is not changed to let it in."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    return page.evaluate(  # type: ignore[no-any-return]
        """async (tags) => {
            const r = await axe.run(document, {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]});
            return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 6).map(n => ({target: n.target.join(" "), summary: n.failureSummary}))}));
        }""",
        TAGS,
    )


def serious(violations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v for v in violations if v["impact"] in FAILING]


# ----------------------------------------------------------------------------- the pages


def _dashboard(page: Any, site: dict[str, Any]) -> None:
    page.wait_for_selector(f"#needs [data-decision]:has(a[href='/tasks/{site['task']}'])", timeout=15000)


def _kanban(page: Any, site: dict[str, Any]) -> None:
    page.goto(site["stack"].web_url + "/kanban")
    page.wait_for_selector(".task-card")


def _timeline(page: Any, site: dict[str, Any]) -> None:
    page.goto(site["stack"].web_url + "/timeline")
    page.wait_for_selector("#conn[data-state=live]")
    with site["stack"].admin() as c:  # an event to show (the backlog is empty on a quiet daemon)
        c.post("/projects", json={"name": f"timeline-{uuid.uuid4().hex[:8]}", "path": str(site["stack"].root / "repo")})
    page.wait_for_selector("#timeline li", state="attached", timeout=10000)


def _task(page: Any, site: dict[str, Any]) -> None:
    page.goto(f"{site['stack'].web_url}/tasks/{site['task']}")
    page.wait_for_selector("#task [data-decision]")
    page.wait_for_selector("#review .diff, #review pre.diff, #review table", timeout=10000)
    page.wait_for_selector("#terminal .xterm-rows", state="attached", timeout=15000)
    try:  # the agent's screen drawn (for the screenshot; the checks do not need it)
        wait_js(page, "(document.querySelector('#terminal .xterm-rows') || {}).textContent?.includes('proceed')", timeout=8000)
    except AssertionError:
        pass


def _escalations(page: Any, site: dict[str, Any]) -> None:
    page.goto(site["stack"].web_url + "/escalations")
    page.wait_for_selector("#escalations [data-decision]")


def _notifications(page: Any, site: dict[str, Any]) -> None:
    page.goto(site["stack"].web_url + "/notifications")
    page.wait_for_selector("h1")


def _settings(page: Any, site: dict[str, Any]) -> None:
    page.goto(site["stack"].web_url + "/settings")
    page.wait_for_selector("#plugins-h")


def _memories(page: Any, site: dict[str, Any]) -> None:
    with site["stack"].admin() as c:  # a memory with a history to show (once per module)
        if not c.get("/memories").json()["items"]:
            c.post("/memories", json={"text": "Prefers short answers with code first", "kind": "preference", "importance": 0.6}).raise_for_status()
            c.post("/brain/turn", json={"text": "/remember the demo repo deploys with make ship"}).raise_for_status()  # a command: no model
            m = c.post("/memories", json={"text": "My staging server is stg-2", "kind": "project", "importance": 0.9}).json()
            c.patch(f"/memories/{m['id']}", json={"text": "My staging server is stg-3"}).raise_for_status()
    page.goto(site["stack"].web_url + "/memories")
    page.wait_for_selector("#memories .memory")
    page.click("#memories .memory [id^=mem-history-btn-]")
    page.wait_for_selector("#memories .memory-versions li")


def _chat(page: Any, site: dict[str, Any]) -> None:
    page.click("#chat-toggle")
    page.wait_for_selector("#chat-view [data-no-model]")


def _notfound(page: Any, site: dict[str, Any]) -> None:
    page.goto(site["stack"].web_url + "/tasks/987654")
    page.wait_for_selector("h1")


PAGES: dict[str, tuple[Any, str | None]] = {
    "login": (None, ""),
    "dashboard": (_dashboard, None),
    "kanban": (_kanban, None),
    "timeline": (_timeline, None),
    "task": (_task, None),
    "escalations": (_escalations, None),
    "notifications": (_notifications, None),
    "settings": (_settings, None),
    "settings-member": (_settings, "member"),
    "memories": (_memories, None),
    "chat": (_chat, None),
    "notfound": (_notfound, None),
}


def visit(browser: Any, site: dict[str, Any], name: str, size: str) -> Any:
    """A page showing ``name`` at ``size``, loaded with its data."""
    arrange, who = PAGES[name]
    stack = site["stack"]
    page = open_page(browser, stack, size, token=site["member"] if who == "member" else who)
    if who == "":
        page.goto(stack.web_url + "/login")
        page.wait_for_selector("#token")
    if arrange is not None:
        arrange(page, site)
    page.wait_for_timeout(300)  # the fonts and a panel refresh settle
    return page


@pytest.mark.parametrize("size", list(SIZES))
def test_axe_finds_no_serious_violation_on_any_page(browser: Any, site: dict[str, Any], size: str) -> None:
    found: dict[str, list[dict[str, Any]]] = {}
    for name in PAGES:
        page = visit(browser, site, name, size)
        bad = serious(axe(page))
        if bad:
            found[name] = bad
        keep_screenshot(page, f"{name}-{size}", full_page=name != "chat")  # the dock is fixed to the viewport
        assert not page.errors, (name, page.errors)
        page.context.close()
    assert not found, json.dumps(found, indent=1)


def test_the_check_fails_on_a_real_violation(browser: Any, site: dict[str, Any]) -> None:
    """The checks above can fail: the same page with a low-contrast, unlabeled control added
    (through the DevTools protocol) is reported."""
    page = visit(browser, site, "kanban", "1440")
    page.evaluate(
        """() => { const b = document.createElement('button'); b.style.color = '#bbb'; b.style.background = '#fff';
                   b.textContent = 'faint'; document.querySelector('main').append(b);
                   const i = document.createElement('input'); document.querySelector('main').append(i); }"""
    )
    ids = {v["id"] for v in serious(axe(page))}
    assert {"color-contrast", "label"} <= ids, ids
    page.context.close()


# ----------------------------------------------------------------------------- beyond axe

CONTRAST_JS = """
() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  // the colour behind the element: the first opaque background of it or its ancestors
  const behind = (el) => { for (let e = el.parentElement; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0.9) return c; }
    return {r: 255, g: 255, b: 255, a: 1}; };
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const s = getComputedStyle(el);
  const ring = parse(s.outlineColor);
  const width = parseFloat(s.outlineWidth) || 0;
  const label = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' ' + (el.textContent || el.getAttribute('aria-label') || '').trim().slice(0, 30);
  if (s.outlineStyle === 'none' || width < 2 || !ring) return {label, ok: false, why: 'no outline of 2 px or more: ' + s.outlineStyle + ' ' + s.outlineWidth};
  const r = ratio(ring, behind(el));
  return {label, ok: r >= 3, why: 'ring ' + s.outlineColor + ' contrast ' + r.toFixed(2) + ':1'};
}
"""


@pytest.mark.parametrize("name", ["dashboard", "task", "settings", "chat"])
def test_focus_ring_has_3_to_1_contrast_on_every_control_tab_reaches(browser: Any, site: dict[str, Any], name: str) -> None:
    page = visit(browser, site, name, "1440")
    bad, seen = [], 0
    for _ in range(80):
        page.keyboard.press("Tab")
        got = page.evaluate(CONTRAST_JS)
        if got is None:
            continue
        seen += 1
        if not got["ok"]:
            bad.append(got)
    assert seen >= 10, f"Tab reached only {seen} controls"
    assert not bad, bad[:10]
    page.context.close()


TARGETS_JS = """
(min) => {
  const out = [];
  const sel = 'button, select, input:not([type=hidden]), textarea, summary, .btn, .nav a, a.task-link, .subnav a';
  for (const el of document.querySelectorAll(sel)) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;            // not shown
    if (el.closest('.xterm, [hidden], .sr-only')) continue;   // the terminal's own helper, hidden ones
    const s = getComputedStyle(el);
    if (s.visibility === 'hidden' || s.display === 'none') continue;
    if (el.type === 'checkbox' || el.type === 'radio') {       // the label is the target
      const l = el.closest('label'); const lr = l ? l.getBoundingClientRect() : r;
      if (lr.height + 0.5 < min) out.push({el: 'checkbox ' + (el.id || el.name), w: lr.width, h: lr.height});
      continue;
    }
    if (r.width + 0.5 < min || r.height + 0.5 < min)
      out.push({el: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' ' + (el.textContent || el.name || '').trim().slice(0, 30), w: Math.round(r.width), h: Math.round(r.height)});
  }
  return out;
}
"""


@pytest.mark.parametrize("size", list(SIZES))
def test_controls_are_large_enough_to_hit(browser: Any, site: dict[str, Any], size: str) -> None:
    """24 px at the desktop (WCAG 2.5.8), 44 px on the touch phone."""
    least = 24 if size == "1440" else 44
    small: dict[str, Any] = {}
    for name in ("login", "dashboard", "kanban", "task", "escalations", "settings", "memories", "chat"):
        page = visit(browser, site, name, size)
        if size == "390":
            assert page.evaluate("matchMedia('(pointer: coarse)').matches"), "the phone context should be a touch screen"
        found = page.evaluate(TARGETS_JS, least)
        if found:
            small[name] = found[:8]
        page.context.close()
    assert not small, json.dumps(small, indent=1)


def test_phone_navigation_shows_every_section_including_settings(browser: Any, site: dict[str, Any]) -> None:
    page = visit(browser, site, "dashboard", "390")
    links = page.evaluate(
        """() => Array.from(document.querySelectorAll('nav.nav a')).map(a => { const r = a.getBoundingClientRect();
             return {text: a.textContent.trim(), left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })"""
    )
    names = [link["text"].split()[0] for link in links]
    assert names == ["Dashboard", "Kanban", "Timeline", "Escalations", "Notifications", "Memories", "Settings"], names
    for link in links:
        assert link["left"] >= 0 and link["right"] <= 390, f"{link['text']} is outside the screen: {link}"
    assert page.evaluate("document.querySelector('nav.nav').scrollWidth <= document.querySelector('nav.nav').clientWidth")
    page.click("nav.nav a:has-text('Settings')")
    page.wait_for_url(f"{site['stack'].web_url}/settings")
    page.context.close()


def test_daemon_down_page(browser: Any, site: dict[str, Any]) -> None:
    """Last (it stops the daemon): the daemon-down page passes axe at both sizes too."""
    stack = site["stack"]
    pages = {size: open_page(browser, stack, size) for size in SIZES}
    stack.stop_daemon()
    for size, page in pages.items():
        page.goto(stack.web_url + "/kanban")
        page.wait_for_selector("text=The Elowen daemon is not answering")
        bad = serious(axe(page))
        keep_screenshot(page, f"down-{size}")
        assert not bad, json.dumps(bad, indent=1)
        page.context.close()
    with pytest.raises(httpx.HTTPError):
        httpx.get(stack.daemon_url + "/health", timeout=1)
