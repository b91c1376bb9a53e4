"""Pure parts of the CLI: configuration from the environment, SSE parsing, KEY=VALUE parsing,
table and event formatting."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from elowen.cli.client import Client, Event, parse_sse
from elowen.cli.config import load_config
from elowen.cli.events import format_event
from elowen.cli.output import table
from elowen.cli.plugins import parse_assignment


def test_config_defaults(tmp_path: Path) -> None:
    cfg = load_config({"HOME": str(tmp_path)})
    assert cfg.url == "http://127.0.0.1:4400"
    assert cfg.autostart and cfg.explicit_token is None
    assert cfg.home == (Path.home() / ".config" / "elowen").absolute()


def test_config_host_port_and_token_file(tmp_path: Path) -> None:
    cfg = load_config({"ELOWEN_HOME": str(tmp_path), "ELOWEN_PORT": "5123"})
    assert cfg.url == "http://127.0.0.1:5123" and cfg.autostart and cfg.port == 5123
    assert cfg.token() is None
    (tmp_path / "admin.token").write_text("elw_secret\n")
    assert cfg.token() == "elw_secret"
    assert load_config({"ELOWEN_HOME": str(tmp_path), "ELOWEN_TOKEN": "elw_env"}).token() == "elw_env"


def test_config_explicit_url_never_autostarts(tmp_path: Path) -> None:
    cfg = load_config({"ELOWEN_HOME": str(tmp_path), "ELOWEN_URL": "http://127.0.0.1:9/"})
    assert cfg.url == "http://127.0.0.1:9" and not cfg.autostart
    assert not load_config({"ELOWEN_HOST": "10.0.0.5"}).autostart
    assert not load_config({"ELOWEN_NO_AUTOSTART": "1"}).autostart


@pytest.mark.parametrize("env", [{"ELOWEN_URL": "ftp://x"}, {"ELOWEN_URL": "nohost"}, {"ELOWEN_PORT": "70000"}, {"ELOWEN_PORT": "abc"}])
def test_config_rejects_bad_values(env: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        load_config(env)


def test_parse_sse_fields_comments_and_multiline_data() -> None:
    raw = b': heartbeat\n\nid: 7\nevent: task.created\ndata: {"id": 1}\n\nretry: 100\nid: 8\ndata: a\ndata: b\r\n\r\nid: 9\nevent: x\n\n'
    events = list(parse_sse(iter(raw.splitlines(keepends=True))))
    assert events == [Event("7", "task.created", '{"id": 1}'), Event("8", "message", "a\nb")]
    assert events[0].json() == {"id": 1} and events[1].json() == "a\nb"


def test_format_event_human_and_json() -> None:
    ev = Event("12", "task.created", '{"id": 3, "title": "T"}')
    assert format_event(ev, as_json=True) == '{"id":12,"type":"task.created","data":{"id":3,"title":"T"}}'
    line = format_event(ev, as_json=False)
    assert line.split() == ["12", "task.created", '{"id":3,"title":"T"}']


def test_parse_assignment() -> None:
    assert parse_assignment("width=120") == ("width", 120)
    assert parse_assignment("socket=elowen-x") == ("socket", "elowen-x")
    assert parse_assignment('names=["a","b"]') == ("names", ["a", "b"])
    assert parse_assignment("on=true") == ("on", True)
    assert parse_assignment("s=a=b") == ("s", "a=b")
    with pytest.raises(click.BadParameter):
        parse_assignment("novalue")


def test_table_aligns_columns(capsys: pytest.CaptureFixture[str]) -> None:
    table([{"id": 1, "name": "a", "tags": ["x", "y"]}, {"id": 100, "name": "bbb", "tags": []}], [("ID", "id"), ("NAME", "name"), ("TAGS", "tags")])
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["ID   NAME  TAGS", "1    a     x,y", "100  bbb   -"]


def test_url_path_quotes_segments_and_drops_empty_query() -> None:
    assert Client.url_path("/tasks", {"state": "open", "label": None, "limit": 5}) == "/tasks?state=open&limit=5"
    assert Client.segment("../x y") == "..%2Fx%20y"


def test_docs_document_every_command() -> None:
    from elowen.cli.main import COMMANDS, cli

    # every command and option is documented somewhere in docs/ (cli.md, or the page of the
    # feature it belongs to: agents.md, autonomy.md, brain.md, web.md)
    doc = "\n".join(p.read_text() for p in sorted((Path(__file__).resolve().parents[2] / "docs").glob("*.md")))
    ctx = click.Context(cli)
    missing = []
    for name in sorted(COMMANDS):
        command = cli.get_command(ctx, name)
        paths = [name]
        if isinstance(command, click.Group):
            paths += [f"{name} {sub}" for sub in command.list_commands(ctx)]
        missing += [p for p in paths if f"elowen {p}" not in doc]
        for param in command.params if not isinstance(command, click.Group) else []:
            missing += [f"{name} {opt}" for opt in param.opts if opt.startswith("--") and opt not in doc]
    assert missing == []
