"""The OpenAI-compatible generator client against a scripted server on loopback: retries, errors, extraction, prompts."""

from __future__ import annotations

import pytest

from kernelgate.adapters.openai_compat import ChatClient, GeneratorError, build_prompt, extract_code
from tests.fake_openai import FakeChatServer, Reply, completion


def _client(server, **kw):
    waits = []
    kw.setdefault("backoff_s", 0.5)
    client = ChatClient(server.base_url, "fake-coder", sleep=waits.append, **kw)
    return client, waits


def test_429_then_200_honours_retry_after():
    with FakeChatServer([Reply(429, "slow down", {"Retry-After": "7"}), completion("hi")]) as server:
        client, waits = _client(server)
        out = client.complete([{"role": "user", "content": "x"}])
    assert out.text == "hi" and out.attempts == 2
    assert waits == [7.0]  # the server's Retry-After, not the 0.5 s backoff
    assert server.paths == ["/v1/chat/completions"] * 2
    assert server.requests[0]["model"] == "fake-coder"
    assert out.metadata()["usage_total_tokens"] == 150 and out.metadata()["attempts"] == 2


def test_5xx_backs_off_exponentially_then_succeeds():
    with FakeChatServer([Reply(500, "boom"), Reply(503, "busy"), completion("ok")]) as server:
        client, waits = _client(server)
        assert client.complete([{"role": "user", "content": "x"}]).text == "ok"
    assert waits == [0.5, 1.0]


def test_timeout_is_retried():
    with FakeChatServer([Reply(200, "{}", delay_s=1.5), completion("late but fine")]) as server:
        client, waits = _client(server, timeout_s=0.3)
        out = client.complete([{"role": "user", "content": "x"}])
    assert out.text == "late but fine" and out.attempts == 2 and len(waits) == 1


def test_gives_up_after_max_attempts_with_the_last_error():
    with FakeChatServer([Reply(502, "bad gateway")] * 3) as server:
        client, waits = _client(server, max_attempts=3)
        with pytest.raises(GeneratorError, match="after 3 attempts.*502") as info:
            client.complete([{"role": "user", "content": "x"}])
    assert info.value.status_code == 502 and len(server.requests) == 3 and len(waits) == 2


def test_other_4xx_is_not_retried_and_api_key_is_sent():
    with FakeChatServer([Reply(400, '{"error": "bad model"}'), completion("never")]) as server:
        client, waits = _client(server, api_key="sk-test")
        with pytest.raises(GeneratorError, match="HTTP 400") as info:
            client.complete([{"role": "user", "content": "x"}])
    assert info.value.status_code == 400 and len(server.requests) == 1 and waits == []
    assert server.headers[0]["Authorization"] == "Bearer sk-test"


def test_a_reply_that_is_not_a_completion_raises():
    with FakeChatServer([Reply(200, {"choices": []})]) as server:
        client, _ = _client(server)
        with pytest.raises(GeneratorError, match="not a chat completion"):
            client.complete([{"role": "user", "content": "x"}])


def test_extract_code_takes_the_last_python_block():
    reply = "Plan:\n```text\nnotes\n```\n```python\nold = 1\n```\nBetter:\n```python\nnew = 2\n```\nDone."
    assert extract_code(reply) == "new = 2\n"
    assert extract_code("```\nplain = 3\n```") == "plain = 3\n"
    assert extract_code("import torch\nx = 1") == "import torch\nx = 1\n"
    assert extract_code("Here:\n```python\ncut = 4\nmore = 5") == "cut = 4\nmore = 5\n"  # a reply cut off mid-fence
    assert extract_code("```py\nshort = 6\n```") == "short = 6\n"


def test_prompt_carries_problem_and_feedback_newest_first():
    messages = build_prompt("class Model: ...", ["Rejected (numerics_mismatch).", "Correct but slow."], backend="triton")
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "class Model: ..." in user and "ModelNew" in user and "triton.jit" in user
    assert user.index("1. Rejected (numerics_mismatch).") < user.index("2. Correct but slow.")
    assert "Earlier attempts" not in build_prompt("class Model: ...")[1]["content"]
