"""Executor spec resolution and allow-lists."""

from __future__ import annotations

import pytest

from elowen.daemon.execspec import DEFAULT_ALLOWED, ExecNotAllowed, ExecSpecError, ResolvedExec, check_allowed, resolve


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
    assert resolve(spec) == ResolvedExec(provider, model, canonical)


def test_fallback_and_plain_allow_list() -> None:
    assert resolve(None, fallback="codex:gpt-5") == ResolvedExec("codex", "gpt-5", "codex:gpt-5")
    with pytest.raises(ExecSpecError, match="not a known spec"):
        resolve("haiku")
    assert resolve("haiku", allow_plain=["haiku"]) == ResolvedExec("claude", "haiku", "haiku")
    with pytest.raises(ExecSpecError, match="fallback"):
        resolve(None, fallback="claude-code")


@pytest.mark.parametrize(
    "spec",
    ["", "  ", "exec:", "foo:bar", "claude:", "opencode:", "elowen:", "elowen:ollama", "elowen:/m", "a /b", "a//b",
     "/x", "x/", "codex:-bad", "sonnet opus", "kilo:a b"],
)
def test_invalid_specs(spec: str) -> None:
    with pytest.raises(ExecSpecError):
        resolve(spec)


def test_allow_lists_use_globs_on_the_canonical_spec() -> None:
    for spec in ("sonnet", "opus", "claude:x", "codex:y", "kilo:z", "a/b", "elowen:o/m"):
        check_allowed(resolve(spec), DEFAULT_ALLOWED)
    check_allowed(resolve("a/b"), ["opencode:*"])
    with pytest.raises(ExecNotAllowed, match=r"'opus' is not in your allowed executors \(sonnet\)"):
        check_allowed(resolve("opus"), ["sonnet"], whose="your")
    with pytest.raises(ExecNotAllowed):
        check_allowed(resolve("haiku", allow_plain=["haiku"]), DEFAULT_ALLOWED)


def test_a_bare_provider_is_allowed_by_its_provider_patterns() -> None:
    for spec in ("claude", "opencode", "codex", "kilo"):
        check_allowed(resolve(spec), DEFAULT_ALLOWED)
        check_allowed(resolve(spec), [f"{spec}:*"])
        check_allowed(resolve(spec), [spec])
    with pytest.raises(ExecNotAllowed):
        check_allowed(resolve("claude"), ["sonnet", "opencode:*"])
