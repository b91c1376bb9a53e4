"""The exec grammar built from provider objects: the four builtin providers and the brain's
``elowen`` give the documented table; a third party's provider is resolvable the same way; a
disabled provider's specs are "unavailable", an unknown name "unknown"."""

from __future__ import annotations

import re

import pytest

from elowen_builtins.agents.execspec import DEFAULT_ALLOWED, Entry, Grammar, entry_of, exec_settings
from elowen_builtins.brain.worker import BrainWorker
from elowen_builtins.claude_code.plugin import ClaudeProvider
from elowen_builtins.codex.plugin import CodexProvider
from elowen_builtins.kilo.plugin import KiloProvider
from elowen_builtins.opencode.plugin import OpenCodeProvider
from elowen_sdk.providers import PROVIDER_MEMBERS, Provider
from elowen_sdk.services.executors import ExecNotAllowed, ExecSpecError, ExecutorUnavailable, ResolvedExec, UnknownExecutor

PLUGINS = {"claude": "claude-code", "codex": "codex", "opencode": "opencode", "kilo": "kilo"}


def builtin_entries() -> list[Entry]:
    entries = [
        entry_of(cls.name, PLUGINS[cls.name], cls({}, plugin=PLUGINS[cls.name])) for cls in (ClaudeProvider, CodexProvider, OpenCodeProvider, KiloProvider)
    ]
    return [*entries, entry_of("elowen", "brain", BrainWorker)]  # the class carries the grammar members


GRAMMAR = Grammar(builtin_entries())


def resolve(spec: str | None, **kwargs: object) -> ResolvedExec:
    return GRAMMAR.resolve(spec, **kwargs)  # type: ignore[arg-type]


class MyCli(Provider):
    """A third party's provider, written against the SDK only."""

    name = "mycli"
    display_name = "My CLI"
    aliases = {"swift": "swift-2", "sonnet": "not-taken"}  # "sonnet" is already Claude Code's
    models = ("swift-2", "deep-1")
    model_pattern = re.compile(r"^[a-z]+-\d$")
    model_hint = "'<word>-<digit>'"

    def _command(self, binary, prompt, *, model, session_id, resume, extra_args, skip_permissions):  # type: ignore[no-untyped-def]
        return [binary, *(["-m", model] if model else []), *extra_args, prompt]


@pytest.mark.parametrize(
    ("spec", "provider", "model", "canonical"),
    [
        ("sonnet", "claude", "sonnet", "sonnet"),
        ("opus", "claude", "opus", "opus"),
        ("exec:opus", "claude", "opus", "opus"),
        ("claude:claude-haiku-4", "claude", "claude-haiku-4", "claude:claude-haiku-4"),
        ("opencode:anthropic/claude-x", "opencode", "anthropic/claude-x", "opencode:anthropic/claude-x"),
        ("codex:gpt-5.1-codex", "codex", "gpt-5.1-codex", "codex:gpt-5.1-codex"),
        ("kilo:qwen/qwen3-coder", "kilo", "qwen/qwen3-coder", "kilo:qwen/qwen3-coder"),
        ("openrouter/qwen3", "opencode", "openrouter/qwen3", "opencode:openrouter/qwen3"),
        ("elowen:ollama/llama3.2", "elowen", "ollama/llama3.2", "elowen:ollama/llama3.2"),
        (None, "claude", "sonnet", "sonnet"),
        ("claude", "claude", "", "claude"),  # bare provider: its default_model setting applies
        ("exec:opencode", "opencode", "", "opencode"),
        ("codex", "codex", "", "codex"),
        ("kilo", "kilo", "", "kilo"),
    ],
)
def test_resolution_table(spec: str | None, provider: str, model: str, canonical: str) -> None:
    got = resolve(spec)
    assert (got.provider, got.model, got.spec) == (provider, model, canonical)
    assert got.plugin == PLUGINS.get(provider, "brain")


def test_fallback_and_plain_allow_list() -> None:
    assert resolve(None, fallback="codex:gpt-5").spec == "codex:gpt-5"
    with pytest.raises(ExecSpecError, match="not a known spec"):
        resolve("haiku")
    assert resolve("haiku", allow_plain=["haiku"]) == ResolvedExec("claude", "haiku", "haiku", "claude-code")
    with pytest.raises(ExecSpecError, match="fallback"):
        resolve(None, fallback="claude-code")


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "  ",
        "exec:",
        "foo:bar",
        "claude:",
        "opencode:",
        "elowen",
        "elowen:",
        "elowen:ollama",
        "elowen:/m",
        "a /b",
        "a//b",
        "/x",
        "x/",
        "codex:-bad",
        "sonnet opus",
        "kilo:a b",
    ],
)
def test_invalid_specs(spec: str) -> None:
    with pytest.raises(ExecSpecError):
        resolve(spec)


def test_unknown_executor_lists_the_available_ones() -> None:
    with pytest.raises(UnknownExecutor) as info:
        resolve("foo:bar")
    assert info.value.code == "unknown_executor" and info.value.status == 422
    assert {"claude", "codex", "elowen", "kilo", "opencode", "opus", "sonnet"} <= set(info.value.available)
    assert "claude" in info.value.message and "sonnet" in info.value.message


def test_allow_lists_use_globs_on_the_canonical_spec() -> None:
    for spec in ("sonnet", "opus", "claude:x", "codex:y", "kilo:z", "a/b", "elowen:o/m"):
        GRAMMAR.check_allowed(resolve(spec), DEFAULT_ALLOWED)
    GRAMMAR.check_allowed(resolve("a/b"), ["opencode:*"])
    with pytest.raises(ExecNotAllowed, match=r"'opus' is not in your allowed executors \(sonnet\)") as info:
        GRAMMAR.check_allowed(resolve("opus"), ["sonnet"], whose="your")
    assert info.value.status == 403 and info.value.code == "exec_not_allowed"
    with pytest.raises(ExecNotAllowed):
        GRAMMAR.check_allowed(resolve("haiku", allow_plain=["haiku"]), ["sonnet", "claude:*"])


def test_a_bare_provider_is_allowed_by_its_provider_patterns() -> None:
    for spec in ("claude", "opencode", "codex", "kilo"):
        GRAMMAR.check_allowed(resolve(spec), [f"{spec}:*"])
        GRAMMAR.check_allowed(resolve(spec), [spec])
    with pytest.raises(ExecNotAllowed):
        GRAMMAR.check_allowed(resolve("claude"), ["sonnet", "opencode:*"])


def test_a_third_party_provider_is_resolvable_with_its_aliases_and_model_rule() -> None:
    grammar = Grammar([*builtin_entries(), entry_of("mycli", "my-plugin", MyCli({}, plugin="my-plugin"))])
    assert grammar.resolve("mycli:deep-1") == ResolvedExec("mycli", "deep-1", "mycli:deep-1", "my-plugin")
    assert grammar.resolve("swift") == ResolvedExec("mycli", "swift-2", "swift", "my-plugin")
    assert grammar.resolve("mycli").model == ""
    assert grammar.resolve("sonnet").provider == "claude"  # an alias another provider holds is not taken
    with pytest.raises(ExecSpecError, match="'<word>-<digit>'"):
        grammar.resolve("mycli:Deep")
    info = next(e for e in grammar.entries.values() if e.name == "mycli").info()
    assert info.kind == "cli" and info.display_name == "My CLI" and info.examples[:2] == ("mycli", "swift")


def test_disabled_provider_specs_are_unavailable_not_unknown() -> None:
    entries = [e for e in builtin_entries() if e.name != "claude"]
    remembered = Entry.from_json("claude", entry_of("claude", "claude-code", ClaudeProvider({})).to_json())
    grammar = Grammar([*entries, remembered])
    for spec in ("sonnet", "claude", "claude:haiku"):
        with pytest.raises(ExecutorUnavailable) as info:
            grammar.resolve(spec)
        assert info.value.plugin == "claude-code" and info.value.status == 422 and info.value.code == "executor_unavailable"
        assert "elowen plugin enable claude-code" in info.value.message and "codex" in info.value.available
        assert "sonnet" not in info.value.available
    with pytest.raises(ExecutorUnavailable, match=r"fallback executor \('sonnet'"):
        grammar.resolve(None, fallback="sonnet")
    assert grammar.resolve("codex").provider == "codex"
    # an enabled provider that declares the same name wins over the remembered one
    assert Grammar([remembered, *builtin_entries()]).resolve("sonnet").provider == "claude"


def test_exec_settings_defaults_and_bad_types() -> None:
    s = exec_settings(None)
    assert s.fallback == "sonnet" and s.allowed == DEFAULT_ALLOWED and s.plain == ()
    s = exec_settings({"fallback": "codex:m", "allowed": ["codex:*"], "plain": ["haiku"]})
    assert (s.fallback, s.allowed, s.plain) == ("codex:m", ("codex:*",), ("haiku",))
    assert exec_settings({"allowed": "codex:*", "plain": [1], "fallback": ""}) == exec_settings(None)


@pytest.mark.parametrize("cls", [ClaudeProvider, CodexProvider, OpenCodeProvider, KiloProvider, MyCli])
def test_every_provider_has_the_members_the_agents_side_reads(cls: type[Provider]) -> None:
    provider = cls({}, plugin="p")
    assert [m for m in PROVIDER_MEMBERS if not hasattr(provider, m)] == []
    assert provider.cli and provider.patterns_package.startswith(("elowen_builtins.", "tests."))


def test_bad_model_errors_say_what_is_wrong() -> None:
    with pytest.raises(ExecSpecError, match=r"'\.\./\.\./etc' contains a '\.\.' path segment") as info:
        GRAMMAR.resolve("claude:../../etc")
    assert "letters, digits" not in str(info.value)
    with pytest.raises(ExecSpecError, match=r"'sonnet' is an alias of claude:sonnet and takes no model; for another model write 'claude:<model>'"):
        GRAMMAR.resolve("sonnet:../../etc")
