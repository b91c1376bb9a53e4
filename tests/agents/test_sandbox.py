"""The agent sandbox (``elowen_builtins.agents.sandbox``): the bubblewrap command line, and
what an agent can and cannot do inside it, checked with a real ``bwrap`` running a shell script
(a real tmux server, a real fake home outside ``/tmp``). The real CLIs run sandboxed in
``tests/e2e/test_sandbox_e2e.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from elowen_builtins.agents.sandbox import (
    SandboxPlan,
    SandboxUnavailable,
    bwrap_argv,
    choose_mode,
    elowen_secrets,
    plan_spawn,
    probe,
    status,
)

needs_bwrap = pytest.mark.skipif(probe() is not None, reason=f"bubblewrap does not work here: {probe()}")


def _pairs(argv: list[str], flag: str) -> list[str]:
    """Targets of every ``flag`` option in argv (``--bind a b`` → ``b``; ``--tmpfs a`` → ``a``)."""
    out = []
    for i, a in enumerate(argv):
        if a == flag:
            out.append(argv[i + 2] if flag in ("--bind", "--ro-bind") else argv[i + 1])
    return out


# --------------------------------------------------------------------------- argv


def test_argv_shape(tmp_path: Path) -> None:
    project, state, home = tmp_path / "p", tmp_path / "state", tmp_path / "elowen"
    for p in (project, state, home):
        p.mkdir()
    argv = bwrap_argv(SandboxPlan(workdir=project, writable=[state, tmp_path / "missing"], hidden=[home]), ["claude", "--x", "hi there"])
    assert argv[0] == "bwrap"
    sep = argv.index("--")
    assert argv[sep + 1 :] == ["claude", "--x", "hi there"]
    opts = argv[:sep]
    assert opts[opts.index("--ro-bind") + 1 : opts.index("--ro-bind") + 3] == ["/", "/"]
    assert "--unshare-pid" in opts and "--unshare-net" not in opts
    assert _pairs(opts, "--tmpfs")[:1] == ["/tmp"]
    assert str(home.resolve()) in _pairs(opts, "--tmpfs")
    assert set(_pairs(opts, "--bind")) == {str(project.resolve()), str(state.resolve())}  # the missing one is skipped
    assert opts[opts.index("--chdir") + 1] == str(project)
    unset = [opts[i + 1] for i, a in enumerate(opts) if a == "--unsetenv"]
    assert {"TMUX", "TMUX_PANE"} <= set(unset)


def test_network_off_unshares_it(tmp_path: Path) -> None:
    argv = bwrap_argv(SandboxPlan(workdir=tmp_path, network=False), ["x"])
    assert "--unshare-net" in argv[: argv.index("--")]


def test_mounts_go_parents_first_so_hiding_wins_inside_the_project(tmp_path: Path) -> None:
    # the project is the user's whole home; Elowen's home lies inside it: bind, then hide
    project = tmp_path / "home"
    elowen = project / ".config" / "elowen"
    elowen.mkdir(parents=True)
    argv = bwrap_argv(SandboxPlan(workdir=project, hidden=[elowen]), ["x"])
    assert argv.index(str(project.resolve())) < argv.index(str(elowen.resolve()))
    # a project inside a hidden folder: hide, then bind
    hidden = tmp_path / "vault"
    inner = hidden / "proj"
    inner.mkdir(parents=True)
    argv = bwrap_argv(SandboxPlan(workdir=inner, hidden=[hidden]), ["x"])
    assert argv.index("--tmpfs", argv.index("/tmp") + 1) < argv.index("--bind")


def test_hidden_file_gets_dev_null_and_the_project_is_never_hidden(tmp_path: Path) -> None:
    db = tmp_path / "elowen.db"
    db.write_text("x")
    argv = bwrap_argv(SandboxPlan(workdir=tmp_path, hidden=[db, tmp_path]), ["x"])
    i = argv.index(str(db.resolve()))
    assert argv[i - 2 : i] == ["--ro-bind", "/dev/null"]
    assert str(tmp_path.resolve()) not in _pairs(argv, "--tmpfs")


def test_readable_reexposed_only_under_a_hidden_path(tmp_path: Path) -> None:
    hidden = tmp_path / "other-project"
    tool = hidden / "node_modules" / "cli"
    tool.mkdir(parents=True)
    plain = Path("/usr/bin")
    argv = bwrap_argv(SandboxPlan(workdir=tmp_path / ".." / tmp_path.name, hidden=[hidden], readable=[tool, plain]), ["x"])
    assert str(tool.resolve()) in _pairs(argv, "--ro-bind")
    assert "/usr/bin" not in _pairs(argv, "--ro-bind")


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        bwrap_argv(SandboxPlan(workdir=tmp_path), [])
    with pytest.raises(ValueError):
        bwrap_argv(SandboxPlan(workdir=tmp_path / "nope"), ["x"])


def test_choose_mode_project_wins() -> None:
    assert choose_mode("bwrap", "none") == "none"
    assert choose_mode("none", "bwrap") == "bwrap"
    assert choose_mode("auto", None, {}) == "auto"
    assert choose_mode("weird", "", {}) == "auto"
    assert choose_mode("auto", None, {"ELOWEN_AGENT_SANDBOX": "none"}) == "none"
    assert choose_mode("bwrap", None, {"ELOWEN_AGENT_SANDBOX": "none"}) == "bwrap"


def test_elowen_secrets(tmp_path: Path) -> None:
    data = tmp_path / "home" / "plugins" / "agents"
    found = elowen_secrets(data, {"ELOWEN_DB": "/srv/e.db", "TMUX_TMPDIR": "/run/t"})
    assert found[0] == tmp_path / "home"
    assert Path("/srv/e.db") in found and Path("/srv/e.db-wal") in found
    assert Path("/run/t") / f"tmux-{os.getuid()}" in found
    assert Path("/var/run/docker.sock") in found


def test_plan_spawn_none_warns_and_bwrap_missing_is_an_error(tmp_path: Path) -> None:
    argv, warning = plan_spawn(mode="none", workdir=str(tmp_path), argv=["cli"], env={}, state_paths=[], hidden=[], network=True)
    assert argv == ["cli"] and warning and "UNSANDBOXED" in warning
    import elowen_builtins.agents.sandbox as sb

    sb._probed["bwrap"] = "bubblewrap ('bwrap') is not installed"
    try:
        with pytest.raises(SandboxUnavailable, match="bwrap"):
            plan_spawn(mode="bwrap", workdir=str(tmp_path), argv=["cli"], env={}, state_paths=[], hidden=[], network=True)
        argv, warning = plan_spawn(mode="auto", workdir=str(tmp_path), argv=["cli"], env={}, state_paths=[], hidden=[], network=True)
        assert argv == ["cli"] and warning and "not installed" in warning
        assert status("auto")["sandboxed"] is False and "UNSANDBOXED" in str(status("auto")["warning"])
        assert "blocked" in str(status("bwrap")["warning"])
    finally:
        probe(refresh=True)


def test_probe_reports_a_missing_program() -> None:
    assert "not installed" in str(probe("elowen-no-such-bwrap"))


# --------------------------------------------------------------------------- inside a real sandbox


@pytest.fixture
def world() -> Iterator[dict[str, Path]]:
    """A fake user home OUTSIDE /tmp (so /tmp's tmpfs does not hide it by accident) holding
    Elowen's home, an ~/.ssh folder, a file ~/x, the project, another project and a CLI folder."""
    base = Path(tempfile.mkdtemp(prefix="elowen-sbx-", dir="/var/tmp"))
    home = base / "home"
    paths = {
        "base": base,
        "home": home,
        "elowen": home / ".config" / "elowen",
        "project": home / "work" / "proj",
        "other": home / "work" / "other",
        "cli": home / ".fakecli",
        "ssh": home / ".ssh",
    }
    for key in ("elowen", "project", "other", "cli", "ssh"):
        paths[key].mkdir(parents=True)
    (home / "x").write_text("precious\n")
    (paths["elowen"] / "admin.token").write_text("admin-secret\n")
    (paths["elowen"] / "elowen.db").write_text("db\n")
    (paths["other"] / "secret.txt").write_text("other-secret\n")
    try:
        yield paths
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run(w: dict[str, Path], script: str, *, env: dict[str, str] | None = None, network: bool = True) -> subprocess.CompletedProcess[str]:
    argv, warning = plan_spawn(
        mode="bwrap",
        workdir=str(w["project"]),
        argv=["/bin/bash", "-c", script],
        env={},
        state_paths=[w["cli"]],
        hidden=[*elowen_secrets(w["elowen"] / "plugins" / "agents"), w["other"]],
        network=network,
    )
    assert warning is None
    full = {"PATH": os.environ["PATH"], "HOME": str(w["home"]), **(env or {})}
    return subprocess.run(argv, capture_output=True, text=True, env=full, timeout=30, check=False)


@needs_bwrap
def test_the_project_and_the_cli_folder_are_writable(world: dict[str, Path]) -> None:
    r = _run(world, 'echo ok > proof.txt && echo s > "$HOME/.fakecli/state" && pwd && echo t > /tmp/t && cat /tmp/t')
    assert r.returncode == 0, r.stderr
    assert (world["project"] / "proof.txt").read_text() == "ok\n"
    assert (world["cli"] / "state").read_text() == "s\n"
    assert r.stdout.splitlines()[0] == str(world["project"])


@needs_bwrap
def test_rm_rf_of_a_file_outside_the_project_fails(world: dict[str, Path]) -> None:
    r = _run(world, 'rm -rf "$HOME/x"; test ! -e "$HOME/x" && echo GONE')
    assert "GONE" not in r.stdout
    assert (world["home"] / "x").read_text() == "precious\n"


@needs_bwrap
def test_writing_authorized_keys_fails(world: dict[str, Path]) -> None:
    r = _run(world, 'echo "ssh-ed25519 AAAA attacker" >> "$HOME/.ssh/authorized_keys" && echo WROTE')
    assert "WROTE" not in r.stdout and r.returncode != 0
    assert not (world["ssh"] / "authorized_keys").exists()


@needs_bwrap
def test_elowen_home_and_other_projects_are_invisible(world: dict[str, Path]) -> None:
    token = world["elowen"] / "admin.token"
    r = _run(world, f'cat "{token}"; ls -A "{world["elowen"]}"; cat "{world["other"]}/secret.txt"; grep -r secret "{world["home"]}/work" 2>/dev/null; echo END')
    assert "admin-secret" not in r.stdout and "other-secret" not in r.stdout
    assert "elowen.db" not in r.stdout
    assert r.stdout.strip().endswith("END")
    assert token.read_text() == "admin-secret\n"


@needs_bwrap
def test_tmux_server_is_out_of_reach(world: dict[str, Path]) -> None:
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    marker = world["base"] / "pwned"
    subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", "new-session", "-d", "-s", "victim", "sh"], check=True)
    try:
        tmux_env = subprocess.run(["tmux", "-L", sock, "display", "-p", "#{socket_path},0,0"], capture_output=True, text=True, check=True).stdout.strip()
        r = _run(
            world,
            f'echo "TMUX=[$TMUX]"; tmux -L {sock} send-keys -t victim "touch {marker}" Enter && echo SENT; '
            f'tmux -S "{tmux_env.split(",")[0]}" send-keys -t victim "touch {marker}" Enter && echo SENT2; '
            f'tmux send-keys -t victim "touch {marker}" Enter && echo SENT3; echo END',
            env={"TMUX": tmux_env, "TMUX_PANE": "%0"},
        )
        assert "TMUX=[]" in r.stdout
        assert "SENT" not in r.stdout, r.stdout
        assert r.stdout.strip().endswith("END")
        # the same command outside the sandbox does reach it (the test can fail)
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "victim", f"touch {marker}", "Enter"], check=True)
        for _ in range(50):
            if marker.exists():
                break
            subprocess.run(["sleep", "0.1"], check=False)
        assert marker.exists()
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


@needs_bwrap
def test_other_processes_and_their_environment_are_invisible(world: dict[str, Path]) -> None:
    probe_proc = subprocess.Popen(["sleep", "30"], env={"ELOWEN_TOKEN": "other-agent-token", "PATH": os.environ["PATH"]})
    try:
        r = _run(world, f"cat /proc/{probe_proc.pid}/environ 2>&1; ls /proc | grep -c '^[0-9]'")
        assert "other-agent-token" not in r.stdout
        assert int(r.stdout.strip().splitlines()[-1]) < 10
    finally:
        probe_proc.kill()
        probe_proc.wait()


@needs_bwrap
def test_network_off_has_no_route_out(world: dict[str, Path]) -> None:
    r = _run(world, "cat /sys/class/net/*/operstate 2>/dev/null | wc -l; ls /sys/class/net", network=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "lo" or r.stdout.split()[1:] == ["lo"]


def test_provider_settings_and_state_paths() -> None:
    from elowen_builtins.claude_code.plugin import ClaudeProvider
    from elowen_builtins.codex.plugin import CodexProvider
    from elowen_builtins.opencode.plugin import OpenCodeProvider
    from elowen_sdk.providers import ProviderError

    with pytest.raises(ProviderError, match="sandbox"):
        OpenCodeProvider({"sandbox": "docker"})
    assert OpenCodeProvider({"sandbox": "bwrap", "sandbox_network": False}).settings.sandbox_network is False
    env = {"HOME": "/h", "XDG_DATA_HOME": "/d"}
    assert Path("/d/opencode") in OpenCodeProvider({}).state_paths(env=env)
    assert Path("/h/.config/opencode") in OpenCodeProvider({}).state_paths(env=env)
    assert {Path("/h/.claude"), Path("/h/.claude.json")} <= set(ClaudeProvider({}).state_paths(env=env))
    assert Path("/c") in CodexProvider({}).state_paths(env={**env, "CODEX_HOME": "/c"})


@needs_bwrap
def test_a_hidden_socket_cannot_be_connected(world: dict[str, Path]) -> None:
    """A read-only mount does not stop ``connect()``: a hidden socket (docker.sock's case) gets
    ``/dev/null`` over it."""
    import socket

    path = world["base"] / "engine.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    try:
        script = f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{path}'); print('CONNECTED')\""
        argv, _ = plan_spawn(mode="bwrap", workdir=str(world["project"]), argv=["/bin/sh", "-c", script], env={}, state_paths=[], hidden=[path], network=True)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        assert "CONNECTED" not in r.stdout
        plain, _ = plan_spawn(mode="bwrap", workdir=str(world["project"]), argv=["/bin/sh", "-c", script], env={}, state_paths=[], hidden=[], network=True)
        assert "CONNECTED" in subprocess.run(plain, capture_output=True, text=True, timeout=30, check=False).stdout  # the test can fail
    finally:
        server.close()
