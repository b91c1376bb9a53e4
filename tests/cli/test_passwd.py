"""``elowen user passwd`` against a real daemon: hidden prompts on a real pseudo-terminal (the
typed password is not echoed), ``--password-stdin`` for scripts, the current password when
changing one's own, ``--remove``, and never a password as an argument."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from .conftest import ELOWEN, Home

TTY_TIMEOUT = 20.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _login(home: Home, name: str, password: str) -> int:
    """``POST /auth/login`` straight at the daemon; the HTTP status."""
    req = urllib.request.Request(
        f"{home.url}/auth/login", data=json.dumps({"name": name, "password": password}).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _add_user(home: Home, name: str) -> str:
    created = home.json("user", "add", name)
    return str(created["token"])


def _stdin(home: Home, *args: str, text: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**home.env, **({"ELOWEN_TOKEN": token} if token else {})}
    return subprocess.run([str(ELOWEN), *args], env=env, input=text, capture_output=True, text=True, timeout=60)


def _on_tty(home: Home, args: list[str], answers: list[tuple[str, str]], token: str | None = None) -> tuple[int, str]:
    """Run ``elowen ARGS`` on a fresh pseudo-terminal (its own session, so the test runner's
    terminal is never touched); type each answer after its prompt appears. Returns the exit
    status and everything the terminal showed."""
    master, slave = pty.openpty()
    env = {**home.env, **({"ELOWEN_TOKEN": token} if token else {})}
    proc = subprocess.Popen([str(ELOWEN), *args], stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    shown = b""

    def read(until: bytes | None, start: int = 0) -> None:
        nonlocal shown
        deadline = time.monotonic() + TTY_TIMEOUT
        while until is None or until not in shown[start:]:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {until!r} on the terminal; it showed {shown!r}")
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                if until is None and proc.poll() is not None:
                    return
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            if not chunk:
                if until is None:
                    return
                raise AssertionError(f"terminal closed before {until!r}; it showed {shown!r}")
            shown += chunk

    try:
        offset = 0
        for prompt, answer in answers:
            read(prompt.encode(), offset)
            offset = len(shown)  # the next prompt must come after this answer
            os.write(master, answer.encode() + b"\n")
        read(None)
        status = proc.wait(TTY_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return status, shown.decode(errors="replace")


def test_admin_sets_a_users_password_from_stdin(daemon: Home) -> None:
    name = _name("ann")
    _add_user(daemon, name)
    proc = _stdin(daemon, "user", "passwd", name, "--password-stdin", text="ann's passphrase\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{name}: password set"
    assert "ann's passphrase" not in proc.stdout + proc.stderr
    assert _login(daemon, name, "ann's passphrase") == 200
    assert _login(daemon, name, "something else") == 401
    listed = [u for u in daemon.json("user", "list") if u["name"] == name]
    assert listed[0]["has_password"] is True


def test_own_password_on_a_terminal_is_prompted_twice_without_echo(daemon: Home) -> None:
    name = _name("ben")
    token = _add_user(daemon, name)
    secret = f"tty-{uuid.uuid4().hex[:12]}"
    status, shown = _on_tty(
        daemon,
        ["user", "passwd"],
        [
            ("New password: ", "short"),  # too short: asked again
            ("New password: ", secret),
            ("Repeat the new password: ", secret + "!"),  # mismatch
            ("New password: ", secret),
            ("Repeat the new password: ", secret),
        ],
        token=token,
    )
    assert status == 0, shown
    assert "8 to 1024 characters" in shown and "do not match" in shown
    assert f"{name}: password set" in shown
    assert secret not in shown and "short" not in shown  # nothing typed was echoed
    assert _login(daemon, name, secret) == 200
    # now that one is set, changing it asks for the current one first
    new = secret + "-2"
    status, shown = _on_tty(
        daemon, ["user", "passwd"], [("Current password: ", secret), ("New password: ", new), ("Repeat the new password: ", new)], token=token
    )
    assert status == 0, shown
    assert _login(daemon, name, new) == 200 and _login(daemon, name, secret) == 401
    # a wrong current password is refused at once, before the new one is asked for
    status, shown = _on_tty(daemon, ["user", "passwd"], [("Current password: ", "not the one")], token=token)
    assert status == 1 and "current password is wrong" in shown, shown
    assert "New password" not in shown
    assert _login(daemon, name, new) == 200


def test_own_password_from_stdin_needs_the_current_one_on_line_two(daemon: Home) -> None:
    name = _name("cal")
    token = _add_user(daemon, name)
    assert _stdin(daemon, "user", "passwd", "--password-stdin", text="first passphrase\n", token=token).returncode == 0
    missing = _stdin(daemon, "user", "passwd", "--password-stdin", text="second passphrase\n", token=token)
    assert missing.returncode == 2 and "second line" in missing.stderr
    ok = _stdin(daemon, "user", "passwd", name, "--password-stdin", text="second passphrase\nfirst passphrase\n", token=token)
    assert ok.returncode == 0, ok.stderr
    assert _login(daemon, name, "second passphrase") == 200
    removed = _stdin(daemon, "user", "passwd", "--remove", "--password-stdin", text="second passphrase\n", token=token)
    assert removed.returncode == 0 and f"{name}: password removed" in removed.stdout, removed.stderr
    assert _login(daemon, name, "second passphrase") == 401


@pytest.mark.parametrize("text", ["", "\n", "short\n"])
def test_stdin_without_a_usable_password_is_a_usage_error(daemon: Home, text: str) -> None:
    name = _name("dee")
    _add_user(daemon, name)
    proc = _stdin(daemon, "user", "passwd", name, "--password-stdin", text=text)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --password-stdin"), proc.stderr
    assert _login(daemon, name, "short") == 401


def test_a_password_is_never_an_argument(daemon: Home) -> None:
    name = _name("eve")
    _add_user(daemon, name)
    for args in (("user", "passwd", name, "hunter2-hunter2"), ("user", "passwd", name, "--password", "hunter2-hunter2")):
        proc = daemon.run(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
    assert _login(daemon, name, "hunter2-hunter2") == 401


def test_a_member_cannot_set_another_users_password(daemon: Home) -> None:
    victim = _name("fay")
    _add_user(daemon, victim)
    member = _add_user(daemon, _name("gus"))
    proc = _stdin(daemon, "user", "passwd", victim, "--password-stdin", text="taken over!!\n", token=member)
    assert proc.returncode == 1 and "admin" in proc.stderr, proc.stderr
    assert _login(daemon, victim, "taken over!!") == 401


def test_changing_ones_password_ends_other_password_logins(daemon: Home) -> None:
    name = _name("hal")
    token = _add_user(daemon, name)
    assert _stdin(daemon, "user", "passwd", "--password-stdin", text="hal passphrase 1\n", token=token).returncode == 0
    login = _login_token(daemon, name, "hal passphrase 1")
    proc = _stdin(daemon, "user", "passwd", name, "--password-stdin", text="hal passphrase 2\n")  # by the admin
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{name}: password set"
    assert "ended 1 session(s)" in proc.stderr
    assert _me_status(daemon, login) == 401 and _me_status(daemon, token) == 200


def test_remove_when_there_is_no_password_says_so(daemon: Home) -> None:
    name = _name("ida")
    token = _add_user(daemon, name)
    for args, tok in ((("user", "passwd", name, "--remove"), None), (("user", "passwd", "--remove"), token)):
        proc = _stdin(daemon, *args, text="", token=tok)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"{name} has no password" and "removed" not in proc.stdout + proc.stderr


def test_user_list_shows_whether_a_password_is_set(daemon: Home) -> None:
    with_pw, without_pw = _name("jo"), _name("ken")
    _add_user(daemon, with_pw)
    _add_user(daemon, without_pw)
    assert _stdin(daemon, "user", "passwd", with_pw, "--password-stdin", text="jo's passphrase\n").returncode == 0
    proc = daemon.run("user", "list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0].split()
    assert header[:4] == ["ID", "NAME", "ROLE", "PASSWORD"], lines[0]
    rows = {line.split()[1]: line.split()[3] for line in lines[1:]}
    assert rows[with_pw] == "yes" and rows[without_pw] == "no", proc.stdout


def _login_token(home: Home, name: str, password: str) -> str:
    req = urllib.request.Request(
        f"{home.url}/auth/login", data=json.dumps({"name": name, "password": password}).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(json.loads(resp.read())["token"])


def _me_status(home: Home, token: str) -> int:
    req = urllib.request.Request(f"{home.url}/users/me", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
