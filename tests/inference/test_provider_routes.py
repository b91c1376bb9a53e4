"""The ``/providers`` routes, served by the inference plugin over its relay's provider methods
(``list_providers`` / ``add_provider`` / ``remove_provider`` of ``InferenceService``), against a
real daemon over HTTP: an admin adds, lists and removes a provider (``config.toml`` changes),
bad input is a 4xx with the error shape, members are refused, and with the inference plugin
disabled the routes are gone."""

from __future__ import annotations

import subprocess
import tomllib
import uuid
from collections.abc import Iterator

import pytest
import tomli_w

from tests.daemon.conftest import DaemonProc, start_daemon
from tests.daemon.helpers import assert_error_shape


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    home = tmp_path_factory.mktemp("providers") / "home"
    home.mkdir()
    sock = f"elowen-test-{uuid.uuid4().hex[:8]}"
    (home / "config.toml").write_text(tomli_w.dumps({"plugins": {"tmux": {"config": {"socket": sock}}}}))
    proc = start_daemon(home)
    try:
        yield proc
    finally:
        proc.stop()
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)


def test_an_admin_adds_lists_and_removes_a_provider(daemon: DaemonProc) -> None:
    with daemon.admin() as admin:
        r = admin.post("/providers", json={"name": "lab", "kind": "openai", "base_url": "http://127.0.0.1:9/v1/", "api_key_env": "LAB_KEY", "timeout": 5})
        assert r.status_code == 201, r.text
        assert {k: r.json()[k] for k in ("name", "kind", "base_url", "api_key_env", "key_present", "timeout", "source", "error")} == {
            "name": "lab",
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "LAB_KEY",
            "key_present": False,
            "timeout": 5,
            "source": "settings",
            "error": None,
        }
        on_disk = tomllib.loads((daemon.home / "config.toml").read_text())
        assert on_disk["inference"]["providers"]["lab"] == {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "LAB_KEY", "timeout": 5}
        items = admin.get("/providers").json()["items"]
        assert [(p["name"], p["source"]) for p in items] == [("lab", "settings"), ("local", "builtin")]

        assert_error_shape(admin.post("/providers", json={"name": "lab", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"}), 409)
        assert admin.post("/providers", json={"name": "lab", "kind": "anthropic", "base_url": "http://127.0.0.1:9", "replace": True}).status_code == 201

        r = admin.delete("/providers/lab")
        assert r.status_code == 200 and r.json() == {"deleted": "lab"}
        assert "inference" not in tomllib.loads((daemon.home / "config.toml").read_text())
        assert_error_shape(admin.delete("/providers/lab"), 404)


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "openai"},
        {"name": "x", "kind": "nonsense", "base_url": "http://127.0.0.1:9"},
        {"name": "x", "kind": "openai", "base_url": "ftp://example.org"},
        {"name": "x", "kind": "openai", "base_url": 7},
        {"name": "x", "kind": "openai", "base_url": "http://127.0.0.1:9", "timeout": True},
        {"name": "bad name!", "kind": "openai", "base_url": "http://127.0.0.1:9"},
    ],
)
def test_bad_provider_bodies_are_422(daemon: DaemonProc, body: dict[str, object]) -> None:
    with daemon.admin() as admin:
        assert_error_shape(admin.post("/providers", json=body), 422)
        assert_error_shape(admin.post("/providers", json=["not", "an", "object"]), 400)


def test_members_are_refused_and_a_disabled_plugin_serves_nothing(daemon: DaemonProc) -> None:
    with daemon.admin() as admin:
        token = admin.post("/users", json={"name": f"m{uuid.uuid4().hex[:6]}", "role": "member"}).json()["token"]
        with daemon.client(token) as member:
            assert_error_shape(member.get("/providers"), 403)
            assert_error_shape(member.post("/providers", json={"name": "y", "kind": "local"}), 403)
            assert_error_shape(member.delete("/providers/local"), 403)
        r = admin.post("/plugins/inference/disable", json={"cascade": True})  # the brain requires it
        assert r.status_code == 200, r.text
        try:
            assert_error_shape(admin.get("/providers"), 404)
        finally:
            for name in ["inference", *r.json()["cascaded"]]:
                assert admin.post(f"/plugins/{name}/enable").status_code == 200
        assert admin.get("/providers").status_code == 200


def test_a_relay_without_a_settings_writer_refuses_to_change_providers() -> None:
    from elowen_builtins.inference import Relay
    from elowen_sdk.errors import ProviderConfigError

    relay = Relay(lambda: {"inference": {"providers": {"lab": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"}}}})
    assert [p["name"] for p in relay.list_providers()] == ["lab"]
    with pytest.raises(ProviderConfigError, match="settings.write"):
        relay.add_provider("x", "openai", "http://127.0.0.1:9/v1")
    with pytest.raises(ProviderConfigError, match="settings.write"):
        relay.remove_provider("lab")
