"""The real local model: llama.cpp's llama-server speaks the OpenAI chat API we rely on."""

from __future__ import annotations

import json

import httpx
import jsonschema

from .local_model import LlamaServer, llama_server  # noqa: F401

LABEL_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["billing", "bug", "other"]}},
    "required": ["label"],
    "additionalProperties": False,
}


def _chat(server: LlamaServer, body: dict) -> httpx.Response:
    with httpx.Client(timeout=60.0) as client:
        return client.post(f"{server.base_url}/chat/completions", json=body)


def _request(server: LlamaServer, content: str, **extra: object) -> dict:
    return {
        "model": server.model,
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": 32,
        **extra,
    }


def test_chat_completion_text_usage_and_repeatable(llama_server: LlamaServer) -> None:  # noqa: F811
    body = _request(llama_server, "Say hello in one short sentence.")
    first = _chat(llama_server, body)
    assert first.status_code == 200, first.text
    data = first.json()

    assert data["object"] == "chat.completion"
    assert isinstance(data["id"], str) and data["id"]
    assert data["model"] == llama_server.model
    [choice] = data["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] in ("stop", "length")
    assert choice["message"]["role"] == "assistant"
    text = choice["message"]["content"]
    assert isinstance(text, str) and text.strip()

    usage = data["usage"]
    assert usage["prompt_tokens"] > 0
    assert 0 < usage["completion_tokens"] <= 32
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]

    second = _chat(llama_server, body)
    assert second.status_code == 200, second.text
    assert second.json()["choices"][0]["message"]["content"] == text


def test_json_schema_response_format(llama_server: LlamaServer) -> None:  # noqa: F811
    body = _request(
        llama_server,
        "Classify this support message as billing, bug or other: "
        "'I was charged twice for my subscription.' Answer in JSON.",
        max_tokens=64,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": LABEL_SCHEMA, "strict": True},
        },
    )
    response = _chat(llama_server, body)
    assert response.status_code == 200, response.text
    content = response.json()["choices"][0]["message"]["content"]
    jsonschema.validate(json.loads(content), LABEL_SCHEMA)


def test_malformed_request_is_a_400_with_an_error_body(llama_server: LlamaServer) -> None:  # noqa: F811
    response = _chat(llama_server, {"model": llama_server.model, "messages": "not a list"})
    assert response.status_code == 400, response.text
    # {"error": {"code": 400, "message": "Expected 'messages' to be an array",
    #            "type": "invalid_request_error"}}
    body = response.json()
    assert list(body) == ["error"]
    assert set(body["error"]) == {"code", "message", "type"}
    assert body["error"]["code"] == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert "messages" in body["error"]["message"]
