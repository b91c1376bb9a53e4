"""The embedded model's generation settings (no model needed: the request arguments the
provider hands to llama-cpp-python's ``create_chat_completion``, and the stop sequences it
derives from a GGUF chat template). ``test_local_model.py`` and
``tests/brain/test_local_model.py`` check the effect on the real model."""

from __future__ import annotations

from elowen_builtins.inference import ChatRequest, Message
from elowen_builtins.inference.config import ProviderConfig
from elowen_builtins.inference.local import GENERATION_DEFAULTS, LocalProvider, stop_sequences

SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_stop_sequences_come_from_the_template() -> None:
    assert stop_sequences(SMOLLM2_TEMPLATE) == ["<|im_end|>", "<|im_start|>"]
    assert stop_sequences("{{ bos_token }}<|start_header_id|>x<|eot_id|>") == ["<|eot_id|>", "<|start_header_id|>"]
    assert stop_sequences("plain {{ messages }}") == []


def test_chat_requests_get_a_repeat_penalty_a_token_cap_and_the_stops() -> None:
    provider = LocalProvider(ProviderConfig(name="local", kind="local"))
    provider._stop = stop_sequences(SMOLLM2_TEMPLATE)
    kwargs = provider._kwargs(ChatRequest("local/smollm2", [Message("user", "hello")]))
    assert kwargs["max_tokens"] == 256 and kwargs["temperature"] == 0.7
    assert 1.1 <= kwargs["repeat_penalty"] <= 1.3 and kwargs["repeat_penalty"] == GENERATION_DEFAULTS["repeat_penalty"]
    assert kwargs["stop"] == ["<|im_end|>", "<|im_start|>"]
    assert kwargs["messages"] == [{"role": "user", "content": "hello"}]
    own = provider._kwargs(ChatRequest("local/smollm2", [Message("user", "hi")], max_tokens=20, temperature=0.0))
    assert own["max_tokens"] == 20 and own["temperature"] == 0.0


def test_structured_requests_keep_plain_sampling_for_the_grammar() -> None:
    provider = LocalProvider(ProviderConfig(name="local", kind="local"))
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    kwargs = provider._kwargs(ChatRequest("local/smollm2", [Message("user", "x")], response_schema=schema))
    assert kwargs["repeat_penalty"] == 1.0 and kwargs["temperature"] == 0.2
    assert kwargs["response_format"] == {"type": "json_object", "schema": schema}
