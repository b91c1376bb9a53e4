"""Reviewing a task's work end to end: a real daemon (the git plugin enabled, as by default)
spawns a real agent process in tmux (the recording agent of ``agentstack.py``, through the
Claude Code provider and the default sandbox) in the task's own git worktree; the agent commits
there; then the diff, the merge into the base branch and a conflict, through the HTTP API, the
web task page in chromium, and the CLI (``elowen task diff|merge|discard``)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait
from tests.web.conftest import login

from .agentstack import AGENT, AgentStack
from .conftest import keep_screenshot
from .gitrepo import commit, git, keep_worktrees_in, make_repo

pytestmark = pytest.mark.slow

# the recording agent, first committing a file in its working folder (as a coding agent would)
COMMITTING_AGENT = (
    r"""
import os, subprocess
task = os.environ.get("ELOWEN_TASK", "?")
with open("agent_output.txt", "w") as f:
    f.write(f"written by the agent of task {task}\n")
env = {**os.environ, "GIT_AUTHOR_NAME": "Agent", "GIT_AUTHOR_EMAIL": "agent@example.invalid", "GIT_COMMITTER_NAME": "Agent", "GIT_COMMITTER_EMAIL": "agent@example.invalid"}
subprocess.run(["git", "add", "agent_output.txt"], env=env, check=False)
done = subprocess.run(["git", "commit", "-q", "-m", f"agent: output of task {task}"], env=env, check=False, capture_output=True, text=True)
with open(os.environ["COMMIT_LOG"], "a") as f:
    f.write(f"{task} {os.getcwd()} {done.returncode} {done.stderr.strip()}\n")
"""
    + AGENT
)


@dataclass
class GitStack(AgentStack):
    @property
    def commit_log(self) -> Path:
        return self.root / "commits.log"

    def write_config(self) -> None:
        super().write_config()
        script = self.root / "agent.py"
        script.write_text(COMMITTING_AGENT)
        wrapper = self.root / "fake-claude"
        wrapper.write_text(f"#!/bin/sh\nexport COMMIT_LOG={self.commit_log}\nexec {sys.executable} {script} {self.recorded}\n")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
        keep_worktrees_in(self.home / "config.toml", self.root / "worktrees")

    def git_project(self) -> tuple[int, Path]:
        repo = self.root / "gitrepo"
        if not repo.exists():
            make_repo(repo, {"README.md": "demo\n", "a.txt": "one\n"})
        with self.admin() as c:
            for p in c.get("/projects").json()["items"]:
                if p["name"] == "gitdemo":
                    return int(p["id"]), repo
            r = c.post("/projects", json={"name": "gitdemo", "path": str(repo)})
            r.raise_for_status()
            return int(r.json()["id"]), repo

    def agent_task(self, title: str) -> int:
        """A task run by the committing agent; returns its id once the agent's commit is in."""
        project, _ = self.git_project()
        with self.admin() as c:
            task = c.post("/tasks", json={"title": title, "project_id": project, "exec": "claude:fake"}).json()
            tid = int(task["id"])

            def committed() -> Any:
                r = c.get(f"/tasks/{tid}/worktree")
                return r.json() if r.status_code == 200 and r.json()["commits"] else None

            wait(
                committed,
                f"the agent's commit in task #{tid}'s worktree",
                timeout=40,
                on_fail=lambda: self.commit_log.read_text() if self.commit_log.exists() else "no commit log",
            )
        return tid

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ELOWEN_HOME": str(self.home), "ELOWEN_URL": self.daemon_url, "ELOWEN_TOKEN": self.admin_token}
        return subprocess.run([str(Path(sys.executable).with_name("elowen")), *args], env=env, capture_output=True, text=True, timeout=60, check=False)


# A stand-in GitHub CLI: GitHub cannot be reached from the test machine, so `gh` is this
# program on the daemon's PATH. It records each argv (and its working folder) as a JSON line;
# `gh auth status` succeeds only once the test has created the `authenticated` file next to it.
FAKE_GH = r"""#!/bin/sh
here=$(dirname "$0")
PYTHON - "$here" "$@" <<'PY'
import json, os, sys
here, argv = sys.argv[1], sys.argv[2:]
with open(os.path.join(here, "gh-calls.jsonl"), "a") as f:
    f.write(json.dumps({"argv": argv, "cwd": os.getcwd()}) + "\n")
if argv[:2] == ["auth", "status"]:
    if os.path.exists(os.path.join(here, "authenticated")):
        print("github.com\n  Logged in to github.com account tester")
        sys.exit(0)
    print("You are not logged into any GitHub hosts. To log in, run: gh auth login", file=sys.stderr)
    sys.exit(1)
if argv[:2] == ["pr", "create"]:
    head = argv[argv.index("--head") + 1]
    print(f"https://github.com/example/gitdemo/pull/{head.rsplit('-', 1)[-1]}")
    sys.exit(0)
sys.exit(2)
PY
""".replace("PYTHON", sys.executable)


@pytest.fixture(scope="module")
def gstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitStack]:
    s = GitStack(tmp_path_factory.mktemp("review"))
    s.write_config()
    bin_dir = s.root / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    path_before = os.environ["PATH"]
    try:
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{path_before}"  # the daemon's PATH has the fake gh
        try:
            s.start_daemon()
        finally:
            os.environ["PATH"] = path_before
        s.start_web()
        yield s
    finally:
        s.stop()


def test_agent_commits_in_its_worktree_and_the_branch_merges(gstack: GitStack) -> None:
    tid = gstack.agent_task("Write the output file")
    _, repo = gstack.git_project()
    with gstack.admin() as c:
        wt = c.get(f"/tasks/{tid}/worktree").json()
        assert wt["branch"] == f"elowen/task-{tid}" and wt["base"] == "main" and wt["ahead"] == 1
        assert wt["commits"][0]["subject"] == f"agent: output of task {tid}" and wt["commits"][0]["author"] == "Agent"
        session = c.get("/sessions", params={"task": tid}).json()["items"][0]
        assert session["workdir"] == wt["path"] != str(repo)  # the agent ran in the worktree
        assert wt["path"].startswith(str(gstack.root / "worktrees"))  # the configured root, outside Elowen's home
        assert not wt["path"].startswith(str(gstack.home))
        diff = c.get(f"/tasks/{tid}/diff").json()
        assert [(f["path"], f["status"], f["additions"]) for f in diff["files"]] == [("agent_output.txt", "A", 1)]
        assert f"+written by the agent of task {tid}" in diff["patch"]
        assert not (repo / "agent_output.txt").exists()  # the project's checkout is untouched so far
        # not while the agent may still work there
        r = c.post(f"/tasks/{tid}/merge", json={})
        assert r.status_code == 409 and r.json()["error"]["code"] == "task_running"
        c.post(f"/tasks/{tid}/cancel").raise_for_status()
        r = c.post(f"/tasks/{tid}/merge", json={"mode": "ff"})
        assert r.status_code == 200, r.text
        assert r.json()["fast_forward"] and git(repo, "rev-parse", "main").strip() == r.json()["commit"]
        assert (repo / "agent_output.txt").read_text() == f"written by the agent of task {tid}\n"
        assert c.get(f"/tasks/{tid}/worktree").json()["state"] == "merged"
        # bad input is a clear 4xx, never a 500
        assert c.post(f"/tasks/{tid}/merge", json={"mode": 3}).status_code == 422
        assert c.get("/tasks/999999/diff").status_code == 404


def test_conflict_in_the_browser_then_merge_from_the_page(browser: Any, gstack: GitStack) -> None:
    _, repo = gstack.git_project()
    tid = gstack.agent_task("Write the output file again")
    with gstack.admin() as c:
        c.post(f"/tasks/{tid}/cancel").raise_for_status()
    # meanwhile someone changed the same file on main: the agent's branch conflicts
    commit(repo, {"agent_output.txt": "a human's version\n"}, "human edit")
    main_before = git(repo, "rev-parse", "main").strip()
    page = login(browser, gstack, 1440, 900)
    page.goto(f"{gstack.web_url}/tasks/{tid}")
    page.wait_for_selector("#review tr[data-file='agent_output.txt']")
    assert "1 commit ahead" in page.inner_text("#review")
    assert f"+written by the agent of task {tid}" in (page.text_content("#review pre.diff") or "")
    keep_screenshot(page, "review-1440")
    page.set_viewport_size({"width": 390, "height": 844})
    keep_screenshot(page, "review-390")
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")  # no sideways scroll on a phone
    page.click("#review-merge")
    flash = page.wait_for_selector("#flash-review .flash.err")
    text = flash.inner_text()
    assert "conflicts in 1 file" in text and "agent_output.txt" in text and "Nothing was changed" in text
    assert git(repo, "rev-parse", "main").strip() == main_before and git(repo, "status", "--porcelain") == ""
    assert (repo / "agent_output.txt").read_text() == "a human's version\n"
    # resolve in the worktree (as a user or the agent would), then merge from the page
    with gstack.admin() as c:
        wt = Path(c.get(f"/tasks/{tid}/worktree").json()["path"])
    subprocess.run(["git", "merge", "-q", "main"], cwd=wt, capture_output=True, check=False)
    (wt / "agent_output.txt").write_text("both versions, resolved\n")
    git(wt, "add", "agent_output.txt")
    git(wt, "commit", "-q", "--no-edit")
    page.reload()
    page.wait_for_selector("#review-merge")
    page.click("#review-merge")
    page.wait_for_selector("#flash-review .flash.ok")
    assert (repo / "agent_output.txt").read_text() == "both versions, resolved\n"
    page.wait_for_selector("#review .wt-merged")  # the panel follows the worktree.merged event
    assert not page.errors
    page.context.close()


def test_cli_diff_merge_discard(gstack: GitStack) -> None:
    tid = gstack.agent_task("CLI review")
    with gstack.admin() as c:
        c.post(f"/tasks/{tid}/cancel").raise_for_status()
    out = gstack.cli("task", "diff", str(tid))
    assert out.returncode == 0, out.stderr
    assert "agent_output.txt" in out.stdout and f"+written by the agent of task {tid}" in out.stdout
    stat_json = gstack.cli("task", "diff", str(tid), "--stat", "--json")
    assert json.loads(stat_json.stdout)["files"][0]["path"] == "agent_output.txt"
    # main meanwhile got its own agent_output.txt: the merge conflicts, a clear error, exit 1
    _, repo = gstack.git_project()
    commit(repo, {"agent_output.txt": f"main's own version before task {tid}\n"}, "main's version")
    merged = gstack.cli("task", "merge", str(tid))
    assert merged.returncode == 1 and "conflict" in merged.stderr and "agent_output.txt" in merged.stderr
    gone = gstack.cli("task", "discard", str(tid), "--yes")
    assert gone.returncode == 0, gone.stderr
    with gstack.admin() as c:
        assert c.get(f"/tasks/{tid}/worktree").json()["state"] == "discarded"
    assert gstack.cli("task", "diff", "999999").returncode == 1


def test_who_may_read_merge_and_discard(gstack: GitStack) -> None:
    import httpx

    from tests.daemon.helpers import make_user

    tid = gstack.agent_task("Access to the review")
    project, _ = gstack.git_project()
    with gstack.admin() as c:
        c.post(f"/tasks/{tid}/cancel").raise_for_status()
        _, outsider = make_user(c, f"outsider-{tid}")
        member_id, member = make_user(c, f"member-{tid}")
        c.post(f"/users/{member_id}/projects", json={"project_id": project}).raise_for_status()
    for token, read, act in ((outsider, 404, 404), (member, 200, 403)):
        with httpx.Client(base_url=gstack.daemon_url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as u:
            assert u.get(f"/tasks/{tid}/diff").status_code == read
            assert u.get(f"/tasks/{tid}/worktree").status_code == read
            assert u.post(f"/tasks/{tid}/merge", json={}).status_code == act
            assert u.post(f"/tasks/{tid}/discard").status_code == act
            listed = [w["task_id"] for w in u.get("/worktrees").json()["items"]]
            assert (tid in listed) is (read == 200)
    with gstack.admin() as c:
        assert c.get(f"/tasks/{tid}/worktree").json()["state"] == "active"  # nobody else changed it


CONTRAST = """() => {
  const lum = (c) => { const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map(Number).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const bg = (el) => { for (; el; el = el.parentElement) { const c = getComputedStyle(el).backgroundColor; const a = c.match(/[\\d.]+/g); if (a && (a.length < 4 || Number(a[3]) > 0.5)) return c; } return "rgb(255, 255, 255)"; };
  let worst = [99, ""];
  for (const el of document.querySelectorAll("#review-diff2html .d2h-code-line-ctn span, #review-diff2html .d2h-code-line-ctn, #review-diff2html .d2h-code-linenumber, #review-diff2html .d2h-file-name, #review-diff2html .d2h-info")) {
    if (!el.textContent.trim()) continue;
    const a = lum(getComputedStyle(el).color), b = lum(bg(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < worst[0]) worst = [ratio, el.className + " " + getComputedStyle(el).color + " on " + bg(el)];
  }
  return worst;
}"""


def test_diff2html_draws_the_diff_with_highlighting_and_falls_back(browser: Any, gstack: GitStack) -> None:
    tid = gstack.agent_task("Highlighted diff")
    with gstack.admin() as c:
        c.post(f"/tasks/{tid}/cancel").raise_for_status()
        wt = Path(c.get(f"/tasks/{tid}/worktree").json()["path"])
    # more work in the worktree, as the agent would: a Python file added, a line of a.txt changed
    commit(wt, {"greet.py": 'def greet(name: str) -> str:\n    return f"hello {name}"\n', "a.txt": "uno\n"}, "greet and a.txt")
    page = login(browser, gstack, 1440, 900)
    page.goto(f"{gstack.web_url}/tasks/{tid}")
    page.wait_for_selector("#review-diff2html .d2h-file-wrapper")
    names = [n.strip() for n in page.locator("#review-diff2html .d2h-file-name").all_inner_texts()]
    assert sorted(names) == ["a.txt", "agent_output.txt", "greet.py"]
    added = " ".join(page.locator("#review-diff2html .d2h-ins .d2h-code-line-ctn").all_inner_texts())
    removed = " ".join(page.locator("#review-diff2html .d2h-del .d2h-code-line-ctn").all_inner_texts())
    assert "def greet(name: str)" in added and "uno" in added and f"written by the agent of task {tid}" in added
    assert "one" in removed and "greet" not in removed
    keywords = page.locator("#review-diff2html .d2h-ins .hljs-keyword").all_inner_texts()
    assert "def" in keywords and "return" in keywords, keywords  # highlight.js ran on the Python file
    assert not page.is_visible("#review-plain") and page.is_visible("#review-diff2html")
    ratio, where = page.evaluate(CONTRAST)
    assert ratio >= 4.5, f"contrast {ratio:.2f} at {where}"
    # keyboard: each file's diff is a focusable region (it may scroll sideways)
    page.focus("#review-discard")
    for _ in range(25):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('#review-diff2html .d2h-file-diff')"):
            break
    else:
        raise AssertionError("Tab never reached a file's diff")
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
    keep_screenshot(page, "review-diff2html-1440")
    page.context.close()
    # diff2html blocked (as if the script failed to load): the server-side text is the diff
    page = login(browser, gstack, 1440, 900)
    page.route("**/diff2html-ui-slim-*.js", lambda route: route.abort())
    page.goto(f"{gstack.web_url}/tasks/{tid}")
    page.wait_for_selector("#review pre.diff")
    assert page.is_visible("#review-plain") and not page.is_visible("#review-diff2html")
    assert "+def greet(name: str) -> str:" in page.inner_text("#review-plain")
    page.context.close()


def test_ask_the_agent_for_changes_reopens_in_the_same_worktree(browser: Any, gstack: GitStack) -> None:
    tid = gstack.agent_task("Changes requested")
    with gstack.admin() as c:
        c.post(f"/tasks/{tid}/cancel").raise_for_status()
        wt = c.get(f"/tasks/{tid}/worktree").json()
    page = login(browser, gstack, 1440, 900)
    page.goto(f"{gstack.web_url}/tasks/{tid}")
    page.wait_for_selector("#review-note")
    note = "Please also write a test for agent_output.txt"
    page.fill("#review-note", note)
    page.click("#review-request")
    flash = page.wait_for_selector("#flash-review .flash.ok")
    assert "same worktree" in flash.inner_text()
    with gstack.admin() as c:
        task = c.get(f"/tasks/{tid}").json()
        assert task["resume_note"] == note and task["state"] in ("open", "in_progress")

        def second_session() -> Any:
            items = c.get("/sessions", params={"task": tid}).json()["items"]
            return items if len(items) >= 2 else None

        sessions = wait(second_session, f"a second agent session on task #{tid}", timeout=40)
        assert {s["workdir"] for s in sessions} == {wt["path"]}  # the agent continued in the same worktree
        again = c.get(f"/tasks/{tid}/worktree").json()
        assert again["state"] == "active" and again["branch"] == wt["branch"] and again["commits"][0]["sha"] == wt["commits"][0]["sha"]
    assert not page.errors
    page.context.close()


def _gh_calls(gstack: GitStack) -> list[dict[str, Any]]:
    log = gstack.root / "bin" / "gh-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_open_a_pull_request_with_gh(browser: Any, gstack: GitStack) -> None:
    tid = gstack.agent_task("Open a PR")
    _, repo = gstack.git_project()
    remote = gstack.root / f"remote-{tid}.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    (gstack.root / "bin" / "authenticated").unlink(missing_ok=True)
    if "origin" in git(repo, "remote").split():
        git(repo, "remote", "remove", "origin")
    with gstack.admin() as c:
        c.post(f"/tasks/{tid}/cancel").raise_for_status()
        wt = c.get(f"/tasks/{tid}/worktree").json()
        # gh not logged in: a clear 409, exit 1 from the CLI, nothing pushed
        out = gstack.cli("task", "pr", str(tid))
        assert out.returncode == 1 and "not logged in" in out.stderr and "gh auth login" in out.stderr
        # no gh at all
        c.patch("/plugins/git/config", json={"values": {"gh": str(gstack.root / "no-such-gh")}}).raise_for_status()
        r = c.post(f"/tasks/{tid}/pr", json={})
        assert r.status_code == 409 and r.json()["error"]["code"] == "gh_missing" and "not installed" in r.json()["error"]["message"]
        c.patch("/plugins/git/config", json={"values": {"gh": ""}}).raise_for_status()
        (gstack.root / "bin" / "authenticated").write_text("yes\n")
        # logged in, but the repository has no remote yet
        r = c.post(f"/tasks/{tid}/pr", json={})
        assert r.status_code == 409 and r.json()["error"]["code"] == "no_remote"
        assert c.post(f"/tasks/{tid}/pr", json={"draft": True}).status_code == 422
    assert git(remote, "for-each-ref").strip() == ""  # nothing was pushed by the refusals
    git(repo, "remote", "add", "origin", str(remote))
    # from the task page
    page = login(browser, gstack, 1440, 900)
    page.goto(f"{gstack.web_url}/tasks/{tid}")
    page.click("#review-pr")
    flash = page.wait_for_selector("#flash-review .flash")
    assert f"Pull request opened: https://github.com/example/gitdemo/pull/{tid}" in flash.inner_text(), flash.inner_text()
    page.context.close()
    branch = f"elowen/task-{tid}"
    assert git(remote, "rev-parse", f"refs/heads/{branch}").strip() == wt["commits"][0]["sha"]  # the real push landed
    create = [call for call in _gh_calls(gstack) if call["argv"][:2] == ["pr", "create"]][-1]
    argv = create["argv"]
    assert argv[argv.index("--head") + 1] == branch and argv[argv.index("--base") + 1] == "main"
    assert argv[argv.index("--title") + 1] == "Open a PR" and f"Opened by Elowen for task #{tid}." in argv[argv.index("--body") + 1]
    assert create["cwd"] == wt["path"]
    # and from the CLI (a second push is up to date)
    out = gstack.cli("task", "pr", str(tid), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["url"] == f"https://github.com/example/gitdemo/pull/{tid}"
