"""The classes of destructive command a static reading used to miss, each with destructive
examples and benign look-alikes, and the reason id each gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from elowen_sdk.destructive import check_command
from elowen_sdk.destructive._embedded import awk_commands, ex_command, sed_commands
from elowen_sdk.destructive._pipes import render_printf
from elowen_sdk.destructive._rules import load_rules
from elowen_sdk.destructive.inline_code import InlineCall, load_languages
from elowen_sdk.destructive.shell import ParseError, parse

KW = {"cwd": "/srv/repo", "checkout": "/srv/repo", "home": "/home/dev"}


def ids(command: str, **kw: str) -> list[str]:
    return [r.split(":", 1)[0] for r in check_command(command, **(kw or KW)).reasons]


CASES: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    # class: ([(destructive command, a reason id it must give)], [benign look-alikes])
    "symlinks": (
        [
            ("ln -s ~ x && rm -rf x/", "rm-outside-checkout"),
            ("ln -s / r && rm -rf r/*", "rm-outside-checkout"),
            ("ln -s /etc/hosts h && echo x >> h", "redirect-outside-checkout"),
            ("ln -s ~/p p && cd p && rm -rf *", "rm-outside-checkout"),
            ("ln -s $T t && rm -rf t/", "unresolved-target"),
        ],
        ["ln -s build/out latest && rm -rf latest", "ln -s ~ home && rm home", "ln -s ../shared/c.yaml c.yaml", "ln -s /tmp/s s && rm -rf s/b"],
    ),
    "ansi_c": (
        [
            ("rm -rf $'\\x2f'", "rm-outside-checkout"),
            ("rm -rf $'\\057etc'", "rm-outside-checkout"),
            ("rm -rf $'\\u002fetc'", "rm-outside-checkout"),
            ("$'\\x72\\x6d' -rf ~", "rm-outside-checkout"),
            ("bash -c $'git push \\x2d\\x2dforce'", "git-force-push"),
            ("rm -rf $'\\ud800'", "unparseable"),
        ],
        ["printf $'a\\tb\\n'", "rm -rf $'build\\x2dtmp'", "echo $'\\x41'"],
    ),
    "unresolved_operands": (
        [("dd if=/dev/zero of=$X", "unresolved-target"), ('rm -rf "$DIR"/*', "unresolved-target"), ('mv build "$OUT"', "unresolved-target")],
        ["X=out.bin; dd if=/dev/zero of=$X count=1", 'DIR=build; rm -rf "$DIR"/*', "dd if=/dev/zero of=disk.img count=1"],
    ),
    "stdin_interpreters": (
        [
            ("python3 - <<<'import shutil; shutil.rmtree(\"/etc\")'", "inline-code-outside-checkout"),
            ('node <<<\'require("fs").rmSync("/etc")\'', "inline-code-outside-checkout"),
            ("bash <<EOF\nrm -rf ~\nEOF", "rm-outside-checkout"),
            ("source /dev/stdin <<<'rm -rf ~'", "rm-outside-checkout"),
            ("echo 'rm -rf ~' | sh -s", "rm-outside-checkout"),
            ("python3 - <<'EOF'\nimport os\nos.system('rm -rf ~')\nEOF", "rm-outside-checkout"),
            ("cat x | source /dev/stdin", "pipe-into-shell"),
        ],
        ["python3 - <<<'print(1)'", "bash <<EOF\nmake test\nEOF", "echo 'print(1)' | python3 -", "sh -s <<<'ls'"],
    ),
    "scripts_the_line_writes": (
        [
            ("echo 'rm -rf ~' > x.sh; bash x.sh", "rm-outside-checkout"),
            ("printf '%s\\n' 'rm -rf ~' | sh", "rm-outside-checkout"),
            ("printf 'rm -rf ~\\n' > x.sh && chmod +x x.sh && ./x.sh", "rm-outside-checkout"),
            ("echo 'import shutil; shutil.rmtree(\"/etc\")' > x.py; python3 x.py", "inline-code-outside-checkout"),
        ],
        ["echo 'make test' > run.sh && bash run.sh", "printf '%s\\n' 'ls -la' | sh", "echo 'print(1)' > x.py; python3 x.py"],
    ),
    "aliases_functions": (
        [
            ("alias x='rm -rf ~'; x", "rm-outside-checkout"),
            ("alias x='rm -rf'; x ~", "rm-outside-checkout"),
            ('f(){ rm -rf "$1"; }; f ~', "rm-outside-checkout"),
            ('f(){ rm -rf "$1"; }', "unresolved-target"),
            ('g(){ "$@"; }; g rm -rf /', "unresolved-program"),
            ('wipe() { rm -rf "$1"/; }; wipe', "rm-outside-checkout"),
        ],
        ["alias ll='ls -la'; ll", "alias ls='ls --color'; ls", 'f(){ rm -rf "$1"; }; f build', "greet() { echo hi; }; greet"],
    ),
    "env_split_multicall": (
        [
            ("env -S 'rm -rf ~'", "rm-outside-checkout"),
            ('env -S"rm -rf /etc"', "rm-outside-checkout"),
            ("env --split-string='rm -rf ~'", "rm-outside-checkout"),
            ('env -S "$CMD"', "unresolved-program"),
            ("busybox rm -rf ~", "rm-outside-checkout"),
            ("toybox sh -c 'rm -rf /'", "rm-outside-checkout"),
            ("env -vS 'rm -rf ~'", "rm-outside-checkout"),
        ],
        ["env -S'make test'", "busybox ls -la", "busybox rm -rf build", "busybox --list"],
    ),
    "options_run_shell": (
        [
            ("git -c alias.x='!rm -rf ~' x", "rm-outside-checkout"),
            ("git -c core.pager='rm -rf ~' log", "rm-outside-checkout"),
            ("git -c alias.p='push -f' p", "git-force-push"),
            ("GIT_SSH_COMMAND='rm -rf ~' git fetch", "rm-outside-checkout"),
            ("vim -c ':!rm -rf ~'", "rm-outside-checkout"),
            ("vi '+!rm -rf ~'", "rm-outside-checkout"),
            ("ex -c 'r !rm -rf ~'", "rm-outside-checkout"),
            ("awk 'BEGIN{system(\"rm -rf ~\")}'", "rm-outside-checkout"),
            ("awk '{system(\"rm \" $1)}' f", "inline-code-unresolved"),
            ("find . -exec sh -c 'rm -rf ~' \\;", "rm-outside-checkout"),
            ("ls | xargs sh -c 'rm -rf /etc'", "rm-outside-checkout"),
            ("tar cf x.tar --to-command='rm -rf ~' src", "rm-outside-checkout"),
            ("ssh -o ProxyCommand='rm -rf ~' h", "rm-outside-checkout"),
            ("fd . ~ -x rm -rf", "rm-outside-checkout"),
            ("git --config-env=core.pager=P log", "inline-code-unresolved"),
        ],
        [
            "git -c core.pager=cat log",
            "git -c alias.st=status st",
            "vim -c ':wq' x",
            "vim -c ':q!' x",
            "awk '{print $1}' f",
            "find . -name '*.pyc' -exec sh -c 'rm -f \"$1\"' _ {} \\;",
            "ssh -o ConnectTimeout=5 h uptime",
        ],
    ),
    "inline_code": (
        [
            ("python3 -c 'import os; os.system(\"rm -rf ~\")'", "rm-outside-checkout"),
            ('python3 -c \'import subprocess as s; s.run(["rm", "-rf", "/etc"])\'', "rm-outside-checkout"),
            ('python3 -c \'open("/etc/passwd", "w")\'', "inline-code-outside-checkout"),
            ('python3 -c \'__import__("os").system("rm -rf ~")\'', "rm-outside-checkout"),
            ("python3 -c 'from shutil import rmtree as r; r(\"/etc\")'", "inline-code-outside-checkout"),
            ("python3 -c 'import subprocess; subprocess.run(c, shell=True)'", "inline-code-unresolved"),
            ('node -e \'const {execSync} = require("child_process"); execSync("rm -rf /")\'', "rm-outside-checkout"),
            ("perl -e '`rm -rf ~`'", "rm-outside-checkout"),
            ("ruby -e '%x(rm -rf ~)'", "rm-outside-checkout"),
            ("php -r 'unlink(\"/etc/passwd\");'", "inline-code-outside-checkout"),
            ("php -r 'system(\"rm -rf ~\");'", "rm-outside-checkout"),
        ],
        [
            "python3 -c 'import os; os.system(\"ls\")'",
            "python3 -c 'print(open(\"/etc/hosts\").read())'",
            'python3 -c \'open("o.txt", "w")\'',
            "node -e 'console.log(/a/.exec(\"abc\"))'",
            "perl -e 'system(\"make\")'",
            "php -r 'file_put_contents(\"o.txt\", 1);'",
        ],
    ),
    "archivers_sync": (
        [
            ("tar --remove-files -czf /tmp/b.tgz ~/docs", "archive-remove-outside-checkout"),
            ("zip -rm a.zip .", "checkout-root-delete"),
            ("rsync --remove-source-files -a host:/srv/ ./d/", "sync-delete-outside-checkout"),
            ("rsync -a --delete build/ user@host:/var/www/", "sync-delete-outside-checkout"),
            ("rsync -a --delete ./ ~/", "sync-delete-outside-checkout"),
            ("7z a -sdel o.7z ~/w", "archive-remove-outside-checkout"),
        ],
        ["tar czf o.tgz --remove-files build", "zip -m l.zip build/log", "rsync -a --delete src/ build/", "rsync -av src/ h:/srv/"],
    ),
    "crontab": (
        [
            ("crontab file", "crontab-replace"),
            ("cat c.txt | crontab", "crontab-replace"),
            ("echo '* * * * * x' | crontab -", "crontab-replace"),
            ("crontab -r", "crontab-remove"),
            ("crontab -u root f", "crontab-replace"),
        ],
        ["crontab -l", "crontab -u dev -l", "crontab -l > /tmp/cron.bak"],
    ),
    "cloud": (
        [
            ("aws ec2 terminate-instances --instance-ids i-1", "cloud-delete"),
            ("aws s3api delete-bucket --bucket b", "cloud-delete"),
            ("kubectl scale deploy web --replicas=0", "cluster-delete"),
            ("kubectl scale --replicas 0 deploy/web", "cluster-delete"),
            ("docker rm -f $(docker ps -aq)", "container-prune"),
            ("docker container prune -f", "container-prune"),
            ("gh repo delete o/r --yes", "repo-delete"),
            ("az group delete -n rg", "cloud-delete"),
            ("gh api -X DELETE repos/o/r", "cloud-delete"),
            ("podman system reset", "container-prune"),
        ],
        [
            "gh api repos/o/r",
            "aws ec2 describe-instances",
            "kubectl scale deploy web --replicas=3",
            "docker rm old",
            "docker ps -aq",
            "gcloud compute instances list",
        ],
    ),
    "sql": (
        [
            ("psql -c 'DELETE FROM t WHERE 1=1'", "sql-destructive"),
            ("psql -c 'DELETE FROM t WHERE true'", "sql-destructive"),
            ("mysql -e 'UPDATE t SET c = NULL'", "sql-destructive"),
            ("psql -c \"DELETE FROM t WHERE 'a'='a'\"", "sql-destructive"),
            ("psql -c 'DELETE FROM t WHERE id = 5 OR 1=1'", "sql-destructive"),
            ("sqlite3 a.db 'DELETE FROM t WHERE 1'", "sql-destructive"),
        ],
        [
            "psql -c 'DELETE FROM t WHERE id = 1'",
            "psql -c 'SELECT * FROM t WHERE 1=1'",
            "psql -c 'UPDATE t SET c = NULL WHERE id = 10'",
            "psql -c 'DELETE FROM t WHERE id = 1 OR id = 2'",
        ],
    ),
}


@pytest.mark.parametrize(("command", "rule_id"), [case for cases, _ in CASES.values() for case in cases])
def test_destructive_example_gives_its_reason(command: str, rule_id: str) -> None:
    assert rule_id in ids(command), check_command(command, **KW).reasons


@pytest.mark.parametrize("command", [cmd for _, benign in CASES.values() for cmd in benign])
def test_benign_look_alike_stays_benign(command: str) -> None:
    assert check_command(command, **KW).reasons == []


def test_links_on_disk_are_followed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"  # tmp_path lies in the scratch space: the link points at /etc
    repo.mkdir()
    (repo / "build").mkdir()
    os.symlink("/etc", repo / "link")
    os.symlink(repo / "build", repo / "inner")
    kw = {"cwd": str(repo), "checkout": str(repo), "home": "/home/dev"}
    assert ids("rm -rf link/", **kw) == ["rm-outside-checkout"]
    assert ids("rm -rf link/*", **kw) == ["rm-outside-checkout"]
    assert ids("echo x > link/f", **kw) == ["redirect-outside-checkout"]
    assert ids("rm -rf link", **kw) == []  # deletes the link, not what it points to
    assert ids("rm -rf inner/", **kw) == []
    assert ids("cd link && rm -rf *", **kw) == ["rm-outside-checkout"]


def test_ansi_c_decoding() -> None:
    words = parse("x $'\\x41\\101\\u00e9\\U0001F600\\cA\\q'").pipelines[0].commands[0].words  # type: ignore[union-attr]
    assert words[1].literal() == "AAé\U0001f600\x01\\q"
    with pytest.raises(ParseError):
        parse("x $'\\U00110000'")


def test_scanners() -> None:
    assert ex_command(":!rm -rf ~") == ["rm -rf ~"]
    assert ex_command("q!") == [] and ex_command("w! f") == []
    assert ex_command("set nu | call system(x)") == [None]
    assert awk_commands('BEGIN{system("ls")} {print | "sort"}') == ["ls", "sort"]
    assert awk_commands('{ print | "sh" }') == [None]
    assert sed_commands("1e rm -rf ~") == ["rm -rf ~"] and sed_commands("s/a/b/e") == [None] and sed_commands("s/e/f/g") == []
    perl = next(lang for lang in load_languages(_inline_table()) if lang.name == "perl")
    assert perl.calls('system "rm -rf " . $x') == [InlineCall("system", None, "exec")]
    assert perl.calls('system "make";') == [InlineCall("system", "make", "exec")]
    assert render_printf("%s-%s\\n", ["a", "b", "c"]) == "a-b\nc-\n"
    assert render_printf("%s", [None]) is None
    python = next(lang for lang in load_languages(_inline_table()) if lang.name == "python")
    assert python.calls("import os as o; o.system('ls')") == [InlineCall("os.system", "ls", "exec")]
    assert python.calls("import subprocess; subprocess.run(['rm', '-rf', 'a b'])") == [InlineCall("subprocess.run", "rm -rf 'a b'", "exec")]
    assert python.calls("open('x')") == [] and python.calls("open('x', mode='a')") == [InlineCall("open", "x", "write")]


def _inline_table() -> dict[str, object]:
    import tomllib

    from elowen_sdk.destructive import RULES_PATH

    load_rules()
    return tomllib.loads(RULES_PATH.read_text())["inline_code"]
