"""The records and errors a service exchanges are the SDK's own classes: what the provider
plugin returns and raises is exactly what a consumer imports from ``elowen_sdk`` (so catching
``elowen_sdk.errors.SessionNotFoundError`` catches the tmux plugin's), and each is rooted at
``ElowenError``."""

from __future__ import annotations

import inspect

import pytest

import elowen_builtins.inference as inference
import elowen_builtins.tmux as tmux
import elowen_sdk.chat as chat
import elowen_sdk.errors as errors
import elowen_sdk.services.tmux as tmux_contract
from elowen_sdk import ElowenError


@pytest.mark.parametrize(
    "name",
    [
        "Message",
        "ChatRequest",
        "ChatResult",
        "Delta",
        "ToolCall",
        "ToolSpec",
        "Usage",
        "InferenceError",
        "UnknownProvider",
        "ProviderConfigError",
        "ProviderHTTPError",
        "BadResponse",
        "LocalModelUnavailable",
    ],
)
def test_inference_exports_the_sdk_classes(name: str) -> None:
    assert getattr(inference, name) is getattr(chat, name)


@pytest.mark.parametrize(
    "name",
    [
        "Spawned",
        "PaneInfo",
        "SendResult",
        "OutputEvent",
        "TmuxError",
        "SessionNotFoundError",
        "SessionExistsError",
        "InvalidNameError",
        "TmuxCommandError",
        "SubmitNotConfirmed",
        "ControlClientClosed",
    ],
)
def test_tmux_exports_the_sdk_classes(name: str) -> None:
    assert getattr(tmux, name) is getattr(tmux_contract, name)


def test_a_consumer_catches_the_plugins_error_through_the_sdk() -> None:
    from elowen_builtins.inference.transport import ContextTooLong as raised_by_the_relay

    with pytest.raises(chat.ContextTooLong):
        raise raised_by_the_relay("prompt of 9000 tokens does not fit 8192")


def test_every_sdk_error_is_an_elowen_error() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, BaseException)]
    assert len(classes) >= 20
    assert [c.__name__ for c in classes if not issubclass(c, ElowenError)] == []
    assert sorted(errors.__all__) == sorted(c.__name__ for c in classes)
