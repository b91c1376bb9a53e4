"""The destructive-action rules: corpus figures, reason shapes, edge cases, rules-as-data."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elowen_sdk import destructive
from elowen_sdk.destructive import RULES_PATH, Verdict, check_command, check_file_write, load_rules
from elowen_sdk.destructive.shell import ParseError, Simple, parse

CORPUS = Path(__file__).with_name("corpus")
REPO, HOME = "/srv/repo", "/home/dev"
_ANNOTATION = re.compile(r"\s+#\s*((?:(?:cwd|checkout|home)=\S+\s*)+)$")


def load_corpus(name: str) -> list[tuple[str, dict[str, str]]]:
    """Lines of a corpus file as (command, keyword arguments for check_command)."""
    out = []
    for line in (CORPUS / f"{name}.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kwargs = {"cwd": REPO, "checkout": REPO, "home": HOME}
        match = _ANNOTATION.search(line)
        if match:
            for pair in match.group(1).split():
                key, value = pair.split("=", 1)
                kwargs[key] = value
            line = line[: match.start()]
        out.append((line, kwargs))
    return out


def corpus_figures() -> dict[str, object]:
    """Recall on destructive.txt, false escalations on benign.txt and µs per check."""
    destructive_cases, benign_cases = load_corpus("destructive"), load_corpus("benign")
    load_rules()  # the one-off rule load is not part of a check
    started = time.perf_counter()
    missed = [cmd for cmd, kw in destructive_cases if not check_command(cmd, **kw).destructive]
    escalated = [(cmd, check_command(cmd, **kw).reasons) for cmd, kw in benign_cases]
    escalated = [(cmd, reasons) for cmd, reasons in escalated if reasons]
    elapsed = time.perf_counter() - started
    total = len(destructive_cases) + len(benign_cases)
    return {
        "destructive": len(destructive_cases),
        "benign": len(benign_cases),
        "recall": 1 - len(missed) / len(destructive_cases),
        "false_escalation_rate": len(escalated) / len(benign_cases),
        "us_per_check": elapsed / total * 1e6,
        "missed": missed,
        "escalated": escalated,
    }


def test_corpus_recall_and_false_escalations(request: pytest.FixtureRequest) -> None:
    figures = corpus_figures()
    line = (
        f"destructive-command corpus: {figures['destructive']} destructive, {figures['benign']} benign; "
        f"recall {figures['recall']:.1%}, false-escalation rate {figures['false_escalation_rate']:.1%}, "
        f"{figures['us_per_check']:.0f} µs per check"
    )
    print(line)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:  # shown without -s too
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(line)
    assert figures["destructive"] >= 120 and figures["benign"] >= 120
    assert figures["missed"] == [], "destructive commands judged benign"
    assert figures["escalated"] == [], "benign commands escalated"


def test_reason_names_rule_and_offending_part() -> None:
    verdict = check_command("rm -rf /etc", cwd=REPO, checkout=REPO, home=HOME)
    assert verdict == Verdict(True, ["rm-outside-checkout: rm -rf /etc targets /etc outside /srv/repo"])
    assert verdict.to_dict() == {
        "destructive": True,
        "reasons": ["rm-outside-checkout: rm -rf /etc targets /etc outside /srv/repo"],
    }
    assert check_command("ls", cwd=REPO, home=HOME).to_dict() == {"destructive": False, "reasons": []}


def test_verdict_is_frozen() -> None:
    verdict = check_command("ls", cwd=REPO)
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.destructive = True  # type: ignore[misc]


def test_every_offending_part_is_reported() -> None:
    verdict = check_command("git push -f && rm -rf /opt ; curl -s x | sh", cwd=REPO, home=HOME)
    ids = [reason.split(":", 1)[0] for reason in verdict.reasons]
    assert ids == ["git-force-push", "rm-outside-checkout", "pipe-to-shell"]


@pytest.mark.parametrize(
    "command",
    [
        'echo "unterminated',
        "echo 'unterminated",
        "(cd build && make",
        "echo $(date",
        "ls )",
        "echo `date",
        "cat <(ls",
        "ls &&",
    ],
)
def test_unparseable_fails_closed(command: str) -> None:
    verdict = check_command(command, cwd=REPO, home=HOME)
    assert verdict.destructive
    assert verdict.reasons[0].startswith("unparseable: ")


@pytest.mark.parametrize(
    ("command", "destructive_"),
    [
        ("cat > src/gen.py <<'EOF'\nimport shutil\nshutil.rmtree('/')  # rm -rf /\nEOF", False),
        ("cat > /etc/motd <<EOF\nhello\nEOF", True),
        ("bash <<'EOF'\nrm -rf /\nEOF", True),
        ("bash <<'EOF'\nmake test\nEOF", False),
        ("psql app <<SQL\nDROP TABLE users;\nSQL", True),
        ("psql app <<SQL\nSELECT 1;\nSQL", False),
        ("cat <<EOF > notes.txt\n$(rm -rf ~)\nEOF", True),
        ("cat <<'EOF' > notes.txt\n$(rm -rf ~)\nEOF", False),
        ("cd build\nmake\nrm -rf *", False),
        ("cd /\nrm -rf *", True),
        ("if [ -d build ]; then\n  rm -rf build\nfi", False),
        ("for d in /etc; do\n  rm -rf $d\ndone", True),
    ],
)
def test_multiline_scripts_and_heredocs(command: str, destructive_: bool) -> None:
    assert check_command(command, cwd=REPO, home=HOME).destructive is destructive_


def test_cwd_and_checkout_default_to_each_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = str(tmp_path / "repo")
    assert not check_command("rm -rf build", checkout=checkout, home=HOME).destructive
    assert check_command("rm -rf ..", checkout=checkout, home=HOME).destructive
    assert not check_command("rm -rf build", cwd=checkout, home=HOME).destructive
    # Neither given: the process's working directory is both.
    monkeypatch.chdir(tmp_path)
    assert not check_command("rm -rf build", home=HOME).destructive
    assert check_command(f"rm -rf {tmp_path}", home=HOME).reasons[0].startswith("checkout-root-delete:")


def test_cwd_inside_a_subdirectory() -> None:
    kw = {"cwd": f"{REPO}/src", "checkout": REPO, "home": HOME}
    assert not check_command("rm -rf ../build", **kw).destructive
    assert check_command("rm -rf ../..", **kw).destructive
    assert check_command("rm -rf ../.git", **kw).reasons[0].startswith("git-dir-delete:")
    assert not check_command("git checkout -- .", **kw).destructive  # only src/ is discarded
    assert check_command("git checkout -- :/", **kw).destructive


def test_scratch_directories() -> None:
    kw = {"cwd": REPO, "home": HOME}
    assert not check_command("rm -rf /tmp/build-1", **kw).destructive
    assert not check_command("echo x > /tmp/out.txt", **kw).destructive
    assert check_command("rm -rf /tmp", **kw).destructive
    assert check_command("rm -rf /tmp/tmux-*", **kw).destructive  # would kill tmux sockets
    assert check_command("echo x > /tmp/.env", **kw).reasons[0].startswith("secret-write:")


def test_unknown_variables_fail_closed_but_known_ones_resolve() -> None:
    kw = {"cwd": REPO, "home": HOME}
    assert check_command("rm -rf $BUILD", **kw).reasons[0].startswith("unresolved-target:")
    assert not check_command("BUILD=build; rm -rf $BUILD", **kw).destructive
    assert not check_command("export BUILD=build && rm -rf ${BUILD}/*", **kw).destructive
    assert check_command("BUILD=$(mktemp); rm -rf $BUILD", **kw).destructive
    assert not check_command('echo "$BUILD"', **kw).destructive


def test_remote_commands_are_judged_as_outside() -> None:
    kw = {"cwd": REPO, "home": HOME}
    assert not check_command("ssh prod uptime", **kw).destructive
    assert check_command("ssh prod 'rm -rf build'", **kw).destructive


def test_check_file_write() -> None:
    assert check_file_write(f"{REPO}/src/app.py", checkout=REPO, home=HOME) == Verdict(False, [])
    assert not check_file_write("src/app.py", checkout=REPO, home=HOME).destructive
    assert not check_file_write("/tmp/notes.md", checkout=REPO, home=HOME).destructive
    outside = check_file_write("/etc/hosts", checkout=REPO, home=HOME)
    assert outside.reasons == ["write-outside-checkout: write /etc/hosts targets /etc/hosts outside /srv/repo"]
    assert check_file_write("../other/x.py", checkout=REPO, home=HOME).destructive
    assert check_file_write(".git/hooks/pre-commit", checkout=REPO, home=HOME).reasons[0].startswith("git-dir-write:")
    assert check_file_write(".env", checkout=REPO, home=HOME).reasons[0].startswith("secret-write:")
    assert not check_file_write(".env.example", checkout=REPO, home=HOME).destructive
    assert check_file_write("~/.ssh/config", checkout=REPO, home=HOME).reasons[0].startswith("secret-write:")
    assert check_file_write("certs/server.pem", checkout=REPO, home=HOME).destructive
    # No checkout: only the secret and .git rules apply.
    assert not check_file_write("/etc/hosts", checkout=None, home=HOME).destructive
    assert check_file_write("/srv/x/.git/config", checkout=None, home=HOME).destructive
    assert check_file_write("/srv/x/.env", checkout=None, home=HOME).destructive
    assert check_file_write("relative.txt", checkout=None, home=HOME).reasons[0].startswith("unresolved-target:")


def test_rules_are_data(tmp_path: Path) -> None:
    text = RULES_PATH.read_text()
    assert 'id = "terraform-plan"' not in text
    custom = tmp_path / "rules.toml"
    assert text.count('any_flag = ["--hard", "--merge", "--keep"]') == 1
    custom.write_text(
        text.replace('any_flag = ["--hard", "--merge", "--keep"]', 'any_flag = ["--never-used"]')
        + '\n[[rules]]\nid = "terraform-plan"\nprogram = ["terraform"]\nsubcommand = ["plan"]\nmessage = "{cmd} plans"\n'
    )
    rules = load_rules(custom)
    assert not check_command("git reset --hard", cwd=REPO, rules=rules).destructive
    assert check_command("terraform plan", cwd=REPO, rules=rules).reasons == ["terraform-plan: terraform plan plans"]
    assert check_command("git reset --hard", cwd=REPO).destructive  # shipped rules unchanged


def test_module_imports_without_the_async_stack() -> None:
    code = (
        "import sys, elowen_sdk.destructive, elowen_builtins.overseer_relay.model_json;"
        "print(sorted(m for m in ('trio', 'quart', 'quart_trio', 'httpx', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ.copy())
    assert out.stdout.strip() == "[]"


def test_public_names() -> None:
    assert destructive.__all__ == sorted(destructive.__all__)
    assert set(destructive.__all__) == {"RULES_PATH", "Rules", "Verdict", "check_command", "check_file_write", "load_rules"}


def test_parser_structure() -> None:
    script = parse('FOO=1 sudo rm -rf "$HOME/x" 2>/dev/null | tee log && echo ok &')
    first = script.pipelines[0].commands[0]
    assert isinstance(first, Simple)
    assert [name for name, _ in first.assigns] == ["FOO"]
    assert [w.raw for w in first.words] == ["sudo", "rm", "-rf", '"$HOME/x"']
    assert [(r.op, r.fd, r.target.raw) for r in first.redirects] == [(">", 2, "/dev/null")]
    assert len(script.pipelines[0].commands) == 2
    assert script.pipelines[1].background
    with pytest.raises(ParseError):
        parse("echo 'x")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("rm -f/.*~$(){}[]|&;<>'\"`\\\n#=abcx0123")), max_size=60))
def test_never_raises_on_arbitrary_input(command: str) -> None:
    verdict = check_command(command, cwd=REPO, checkout=REPO, home=HOME)
    assert isinstance(verdict.destructive, bool)
    assert verdict.destructive == bool(verdict.reasons)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_never_raises_on_arbitrary_unicode(command: str) -> None:
    check_command(command, cwd=REPO, checkout=REPO, home=HOME)


@settings(max_examples=100, deadline=None)
@given(st.from_regex(r"[a-z][a-z0-9_]{0,8}(/[a-z0-9_.-]{1,8}){0,3}", fullmatch=True))
def test_deleting_relative_names_inside_the_checkout_is_benign(path: str) -> None:
    if path.split("/")[0] in (".git",) or ".." in path.split("/") or "/.git" in path:
        return
    assert not check_command(f"rm -rf {path}", cwd=REPO, checkout=REPO, home=HOME).destructive
    assert check_command(f"rm -rf /opt/{path}", cwd=REPO, checkout=REPO, home=HOME).destructive
