"""The scenes of the capture campaign (``python -m tests.support.capture --list``).

Each scene drives one real CLI into one state and saves it under
``tests/fixtures/screens/<cli>/captured/``; the number is the scene's base number at 200x50 and
base + 1 at 80x24. What each shows is listed in ``tests/fixtures/screens/CAPTURED.md``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.support.agent_env import AgentLaunch
from tests.support.capture import Session, calls, edit_json, one_call, scene
from tests.support.model_server import ToolCall

Size = tuple[int, int]
MCP_SERVER = Path(__file__).resolve().parent / "mcp_echo_server.py"


def _n(base: int, size: Size) -> int:
    return base + (1 if size[0] < 120 else 0)


def _ask_everything(cli: str) -> object:
    """OpenCode/Kilo: ask for bash, edit (covers write) and webfetch."""

    def setup(launch: AgentLaunch) -> None:
        path = launch.home / ".config" / cli / f"{cli}.json"
        edit_json(path, lambda c: c.__setitem__("permission", {"bash": "ask", "edit": "ask", "webfetch": "ask"}))

    return setup


# ------------------------------------------------------------------ OpenCode / Kilo prompts


def _oc_prompt(cli: str, base: int, what: str, tool: str, args: dict[str, object], marker: str, size: Size, name: str = "") -> None:
    with Session(cli, what, one_call(tool, args), size=size, setup=_ask_everything(cli)) as pane:  # type: ignore[arg-type]
        pane.submit(f"please {what}")
        pane.wait_text(marker, timeout=120)
        pane.wait_text("Allow once", timeout=30)
        pane.save(_n(base, size), "permission_prompt", name or what)


for _cli in ("opencode", "kilo"):

    def _write(size: Size, cli: str = _cli) -> None:
        """write tool: a new file in the repo (`write` {filePath, content})"""
        repo = Path(f"/tmp/elowen-cap/{cli}-write/work/repo")
        _oc_prompt(cli, 30, "write", "write", {"filePath": str(repo / "notes" / "hello.txt"), "content": "hello\nworld\n"}, "Permission required", size)

    def _webfetch(size: Size, cli: str = _cli) -> None:
        """webfetch tool: a URL (`webfetch` {url, format})"""
        _oc_prompt(cli, 32, "webfetch", "webfetch", {"url": "https://example.com/some/long/path/page.html", "format": "text"}, "Permission required", size)

    scene(f"{_cli}-write")(_write)
    scene(f"{_cli}-webfetch")(_webfetch)


# ------------------------------------------------------------------ Claude prompts


NOTEBOOK = {
    "cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [], "source": ["print('one')\n"]}],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@scene("claude-notebook")
def _claude_notebook(size: Size) -> None:
    """NotebookEdit of demo.ipynb (read first, as the tool requires)"""
    repo = Path("/tmp/elowen-cap/claude-notebook/work/repo")
    nb = repo / "demo.ipynb"
    steps = [
        ToolCall("Read", {"file_path": str(nb)}),
        ToolCall("NotebookEdit", {"notebook_path": str(nb), "cell_id": "c1", "new_source": "print('two')\n", "edit_mode": "replace"}),
    ]

    def setup(launch: AgentLaunch) -> None:
        nb.write_text(json.dumps(NOTEBOOK, indent=1) + "\n")

    with Session("claude", "notebook", calls(steps), size=size, setup=setup) as pane:
        pane.submit("please edit the notebook")
        pane.wait_text("Do you want to", timeout=120)
        pane.save(_n(30, size), "permission_prompt", "notebook_edit")


@scene("claude-mcp")
def _claude_mcp(size: Size) -> None:
    """an MCP tool (`mcp__demo__echo` of a stdio MCP server in ~/.claude.json)"""

    def setup(launch: AgentLaunch) -> None:
        server = {"type": "stdio", "command": sys.executable, "args": [str(MCP_SERVER)], "env": {}}
        edit_json(launch.home / ".claude.json", lambda c: c.__setitem__("mcpServers", {"demo": server}))

    with Session("claude", "mcp", one_call("mcp__demo__echo", {"text": "hello from the model"}), size=size, setup=setup) as pane:
        pane.submit("please echo")
        pane.wait_text("Do you want to", timeout=120)
        pane.save(_n(32, size), "permission_prompt", "mcp_tool")


# ------------------------------------------------------------------ Codex network


def _codex_features(**features: bool) -> object:
    def setup(launch: AgentLaunch) -> None:
        path = launch.home / ".codex" / "config.toml"
        text = path.read_text()
        extra = "".join(f"{k} = {str(v).lower()}\n" for k, v in features.items())
        path.write_text(text.replace("[features]\n", "[features]\n" + extra))

    return setup


@scene("codex-network-exec")
def _codex_network_exec(size: Size) -> None:
    """exec_command asking for network access (with_additional_permissions)"""
    args = {
        "cmd": "curl -sS https://example.com/data.json",
        "sandbox_permissions": "with_additional_permissions",
        "additional_permissions": {"network": {"enabled": True}},
        "justification": "Fetch the data file",
    }
    with Session("codex", "network-exec", one_call("exec_command", args), size=size, setup=_codex_features(exec_permission_approvals=True)) as pane:
        pane.submit("please fetch")
        pane.wait(lambda s: "Would you like" in s or "Do you want" in s, timeout=120, what="a prompt")
        pane.save(_n(30, size), "permission_prompt", "network_exec")


@scene("codex-permissions")
def _codex_permissions(size: Size) -> None:
    """request_permissions tool asking for network access"""

    def setup(launch: AgentLaunch) -> None:
        _codex_features(request_permissions_tool=True, exec_permission_approvals=True)(launch)  # type: ignore[operator]

    args = {"permissions": {"network": {"enabled": True}}, "reason": "Download the test data"}
    with Session("codex", "permissions", one_call("request_permissions", args), size=size, setup=setup) as pane:
        pane.submit("please ask for the network")
        pane.wait(lambda s: "Would you like" in s or "Do you want" in s, timeout=120, what="a prompt")
        pane.save(_n(32, size), "permission_prompt", "request_permissions")


# ------------------------------------------------------------------ interrupt states


def _interrupt(cli: str, base: int, size: Size) -> None:
    """Working on a slow model reply, then Esc once, (OpenCode/Kilo: Esc again), then Esc and
    Esc again on the idle composer."""
    # the state each screen is (CAPTURED.md): (esc once, after, esc on composer, esc again)
    states = {
        "claude": ("idle", "idle", "idle", "idle"),
        "codex": ("idle", "idle", "idle", "unknown_dialog"),
    }.get(cli, ("working", "idle", "idle", "idle"))
    last = "transcript_browser" if cli == "codex" else "esc_esc_on_composer"
    with Session(cli, "interrupt", one_call("noop", {}, delay=60), size=size) as pane:  # type: ignore[arg-type]
        pane.submit("Slowly please, take your time")
        pane.wait(lambda s: classify_state(cli, s) == "working", timeout=60, settle=2.0, what="working")
        pane.keys("Escape")
        time.sleep(0.8)
        pane.save(_n(base, size), states[0], "esc_once")
        if cli in ("opencode", "kilo"):
            time.sleep(0.5)
            pane.keys("Escape")
        time.sleep(2.5)
        pane.save(_n(base + 2, size), states[1], "after_interrupt")
        pane.keys("Escape")
        time.sleep(0.8)
        pane.save(_n(base + 4, size), states[2], "esc_on_composer")
        pane.keys("Escape")
        time.sleep(1.5)
        pane.save(_n(base + 6, size), states[3], last)


def classify_state(cli: str, screen: str) -> str:
    from elowen_builtins.agents.screen import classify

    return classify(cli, screen).state


for _cli, _base in (("claude", 40), ("codex", 40), ("opencode", 40), ("kilo", 40)):

    def _int(size: Size, cli: str = _cli, base: int = _base) -> None:
        """interrupt states: Esc once while working, after the interrupt, Esc (twice) on the composer"""
        _interrupt(cli, base, size)

    scene(f"{_cli}-interrupt")(_int)


# ------------------------------------------------------------------ pickers (OpenCode / Kilo)


def _picker(cli: str, base: int, command: str, what: str, size: Size) -> None:
    with Session(cli, "picker", one_call("noop", {}), size=size) as pane:  # type: ignore[arg-type]
        pane.wait_idle()
        time.sleep(2)
        if command.startswith("C-"):
            pane.keys(command)
        else:
            pane.text(command)
            time.sleep(1.0)
            pane.keys("Enter")
            if not pane._shows("Select model", 5.0):
                pane.keys("Enter")  # the first Enter only took the completion menu's entry
        time.sleep(2.5)
        pane.save(_n(base, size), "unknown_dialog", what)


for _cli in ("opencode", "kilo"):

    def _models(size: Size, cli: str = _cli) -> None:
        """/models: the model picker"""
        _picker(cli, 50, "/models", "model_picker", size)

    def _palette(size: Size, cli: str = _cli) -> None:
        """ctrl+p: the command palette"""
        _picker(cli, 52, "C-p", "command_palette", size)

    scene(f"{_cli}-models")(_models)
    scene(f"{_cli}-palette")(_palette)


# ------------------------------------------------------------------ onboarding and update dialogs


@scene("claude-onboarding")
def _claude_onboarding(size: Size) -> None:
    """first start with no ~/.claude.json onboarding flag: theme picker, then what follows"""

    def setup(launch: AgentLaunch) -> None:
        (launch.home / ".claude.json").write_text("{}\n")

    with Session("claude", "onboarding", one_call("noop", {}), size=size, trust=False, setup=setup) as pane:
        pane.wait(lambda s: len(s.strip()) > 40, timeout=60, settle=3.0, what="a first screen")
        pane.save(_n(50, size), "unknown_dialog", "theme_picker")
        pane.keys("Enter")
        time.sleep(3)
        pane.save(_n(52, size), "unknown_dialog", "security_notes")
        pane.keys("Enter")
        time.sleep(3)
        pane.save(_n(54, size), "trust_prompt", "after_onboarding")


@scene("claude-api-key")
def _claude_api_key(size: Size) -> None:
    """ANTHROPIC_API_KEY instead of a token: "Do you want to use this API key?" """

    def setup(launch: AgentLaunch) -> None:
        token = launch.env.pop("ANTHROPIC_AUTH_TOKEN")
        launch.env["ANTHROPIC_API_KEY"] = "sk-ant-api03-" + token + "-0123456789abcdefghij"

    with Session("claude", "api-key", one_call("noop", {}), size=size, setup=setup) as pane:
        pane.wait(lambda s: "API key" in s, timeout=60, settle=2.0, what="the API key question")
        pane.save(_n(56, size), "unknown_dialog", "api_key_question")


@scene("codex-update")
def _codex_update(size: Size) -> None:
    """a newer version known from the update check's cache ($CODEX_HOME/version.json)"""

    def setup(launch: AgentLaunch) -> None:
        codex = launch.home / ".codex"
        cfg = codex / "config.toml"
        cfg.write_text(cfg.read_text().replace("check_for_update_on_startup = false", "check_for_update_on_startup = true"))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        (codex / "version.json").write_text(json.dumps({"latest_version": "0.999.0", "last_checked_at": now, "dismissed_version": None}) + "\n")

    with Session("codex", "update", one_call("noop", {}), size=size, setup=setup) as pane:
        pane.wait(lambda s: len(s.strip()) > 40, timeout=60, settle=4.0, what="a first screen")
        pane.save(_n(50, size), "unknown_dialog", "update_offer")


# ------------------------------------------------------------------ long arguments in narrow panes

LONG_URL = "https://example.com/" + "/".join(f"segment-{i:02d}-of-a-very-long-path" for i in range(6)) + "/page.html?query=one&other=two"


@scene("claude-webfetch-long")
def _claude_webfetch_long(size: Size) -> None:
    """WebFetch of a URL longer than the pane is wide"""
    with Session("claude", "webfetch-long", one_call("WebFetch", {"url": LONG_URL, "prompt": "Summarise"}), size=size) as pane:
        pane.submit("please fetch")
        pane.wait_text("fetch this content", timeout=120)
        pane.save(_n(60, size), "permission_prompt", "webfetch_long_url")


for _cli in ("opencode", "kilo"):

    def _wf_long(size: Size, cli: str = _cli) -> None:
        """webfetch of a URL longer than the pane is wide"""
        _oc_prompt(cli, 60, "webfetch-long", "webfetch", {"url": LONG_URL, "format": "text"}, "Permission required", size, "webfetch_long_url")

    scene(f"{_cli}-webfetch-long")(_wf_long)


@scene("codex-network-proxy")
def _codex_network_proxy(size: Size) -> None:
    """a sandboxed command reaching a host through Codex's network proxy: blocked, no prompt"""

    def setup(launch: AgentLaunch) -> None:
        path = launch.home / ".codex" / "config.toml"
        text = path.read_text().replace('sandbox_mode = "read-only"', 'sandbox_mode = "workspace-write"')
        text += "\n[sandbox_workspace_write]\nnetwork_access = true\n\n[features.network_proxy]\nenabled = true\n"
        path.write_text(text)
        # Codex runs its sandbox helper as `codex-linux-sandbox` (the codex binary under that
        # name) from PATH
        real = Path(launch.argv[0]).parent.parent / "@openai" / "codex-linux-x64" / "vendor" / "x86_64-unknown-linux-musl" / "bin" / "codex"
        bindir = launch.home / "bin"
        bindir.mkdir(exist_ok=True)
        (bindir / "codex-linux-sandbox").symlink_to(real)
        launch.env["PATH"] = f"{bindir}:{launch.env['PATH']}"

    args = {"cmd": "curl -sS -m 20 http://example.com/data.json"}
    with Session("codex", "network-proxy", one_call("exec_command", args), size=size, setup=setup) as pane:
        pane.submit("please fetch")
        pane.wait(lambda s: "network access" in s or "Would you like" in s or "Worked for" in s, timeout=120, what="a prompt")
        pane.save(_n(34, size), "idle", "network_blocked_by_proxy")


# not read-only (Claude runs read-only commands such as echo without asking)
LONG_COMMAND = (
    "mkdir -p build/first-part-of-a-long-directory-name && touch build/second-part-of-the-same-long-command.txt && rm -f build/third-part-that-comes-last.txt"
)


def _bash_long(cli: str, size: Size) -> None:
    tool, args = {
        "claude": ("Bash", {"command": LONG_COMMAND, "description": "Print three parts"}),
        "codex": ("exec_command", {"cmd": LONG_COMMAND, "sandbox_permissions": "require_escalated", "justification": "Print three parts"}),
    }.get(cli, ("bash", {"command": LONG_COMMAND, "description": "Print three parts"}))
    marker = {"claude": "Do you want to proceed", "codex": "Would you like to run"}.get(cli, "Permission required")
    with Session(cli, "bash-long", one_call(tool, args), size=size) as pane:  # type: ignore[arg-type]
        pane.submit("please run it")
        pane.wait_text(marker, timeout=150)
        if cli in ("opencode", "kilo"):
            pane.wait_text("Allow once", timeout=30)
        pane.save(_n(62, size), "permission_prompt", "bash_long_command")


for _cli in ("claude", "codex", "opencode", "kilo"):

    def _bl(size: Size, cli: str = _cli) -> None:
        """a shell command longer than the pane is wide"""
        _bash_long(cli, size)

    scene(f"{_cli}-bash-long")(_bl)


@scene("claude-agent")
def _claude_agent(size: Size) -> None:
    """the Agent (sub-agent) tool: 2.1.197 runs it without asking"""
    from tests.support.model_server import ParsedRequest, Reply

    def script(req: ParsedRequest) -> Reply:
        if not req.has_tools:
            return Reply(text="Fake session title")
        if "please delegate" not in req.prompt:  # the sub-agent's own conversation
            return Reply(text="SUBAGENT: nothing to do.")
        if req.tool_results:
            return Reply(text="FAKE: done.")
        args = {"description": "Look around", "prompt": "List the files", "subagent_type": "general-purpose"}
        return Reply(text="FAKE: I will delegate.", tool_calls=(ToolCall("Agent", args),))

    with Session("claude", "agent", script, size=size) as pane:
        pane.submit("please delegate")
        pane.wait(lambda s: "Do you want" in s or "FAKE: done." in s, timeout=120, what="a prompt or the end")
        pane.save(_n(64, size), "idle", "agent_ran_without_asking")


LONG_PATH = "notes/" + "/".join(f"level-{i}-of-a-deep-folder" for i in range(4)) + "/hello.txt"

for _cli in ("opencode", "kilo"):

    def _write_long(size: Size, cli: str = _cli) -> None:
        """write of a file whose relative path is longer than the pane is wide"""
        repo = Path(f"/tmp/elowen-cap/{cli}-write-long/work/repo")
        _oc_prompt(cli, 66, "write-long", "write", {"filePath": str(repo / LONG_PATH), "content": "hello\n"}, "Permission required", size, "write_long_path")

    scene(f"{_cli}-write-long")(_write_long)
