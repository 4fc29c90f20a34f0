"""Generators behind an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, hosted APIs).

    client = ChatClient("http://127.0.0.1:8000/v1", model="Qwen/Qwen2.5-Coder-32B-Instruct")
    messages = build_prompt(problem_source, feedback=log.last_feedback(problem, k=3))
    completion = client.complete(messages)
    source = extract_code(completion.text)

``ChatClient`` posts to ``<base_url>/chat/completions`` over httpx. A 429, a 5xx, a timeout or a
dropped connection is retried (tenacity) with exponential backoff, or after the server's
``Retry-After`` when it sends one; any other 4xx, a reply that is not a completion, or running out
of attempts raises ``GeneratorError``. ``extract_code`` takes the last fenced Python block of a
reply; ``build_prompt`` writes the request from the problem's source and the feedback of earlier
verdicts.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from kernelgate.errors import KernelgateError

if TYPE_CHECKING:
    import httpx
    from tenacity import RetryCallState


def _client_modules():
    """httpx and tenacity, which only ``ChatClient`` needs: the ``openai`` extra."""
    try:
        import httpx
        import tenacity
    except ImportError as exc:
        raise ModuleNotFoundError(f"ChatClient needs httpx and tenacity ({exc.name} is not installed): "
                                  "pip install 'kernelgate[openai]'", name=exc.name) from exc
    return httpx, tenacity

__all__ = ["ChatClient", "Completion", "GeneratorError", "extract_code", "build_prompt", "SYSTEM_PROMPT",
           "RETRY_STATUSES"]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""HTTP statuses worth another attempt (rate limited, server trouble); any 5xx is retried too."""

SYSTEM_PROMPT = ("You are an expert GPU kernel engineer. You replace PyTorch reference models with faster custom "
                 "GPU kernels that compute the same result.")

_BACKEND_HINTS = {
    "triton": "Write the kernels in Triton (`import triton`, `import triton.language as tl`, `@triton.jit`).",
    "cuda": "Write the kernels in CUDA C++ compiled with torch.utils.cpp_extension.load_inline.",
    "tilelang": "Write the kernels in TileLang (`import tilelang`, `import tilelang.language as T`).",
}


class GeneratorError(KernelgateError):
    """The generator endpoint did not give a completion (after retries, or a request it refuses)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class _Retryable(Exception):
    """An attempt that failed in a way worth retrying; carries the server's Retry-After, if any."""

    def __init__(self, message: str, retry_after_s: float | None = None, status_code: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.status_code = status_code


@dataclass
class Completion:
    """One chat completion and how it was obtained."""

    text: str
    model: str
    finish_reason: str | None
    usage: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    """Wall time of the whole call, retries and waits included."""
    attempts: int = 1
    prompt_sha256: str = ""
    base_url: str = ""

    def metadata(self) -> dict[str, Any]:
        """What the verdict log keeps about the generator for this candidate."""
        return {"model": self.model, "base_url": self.base_url, "finish_reason": self.finish_reason,
                "attempts": self.attempts, "seconds": round(self.seconds, 3), "prompt_sha256": self.prompt_sha256,
                **{f"usage_{k}": v for k, v in self.usage.items() if isinstance(v, (int, float))}}


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class ChatClient:
    """A small client for ``POST <base_url>/chat/completions``.

    ``max_attempts`` counts every try; the wait before try n+1 is ``backoff_s * 2**(n-1)``, at most
    ``max_backoff_s``, or the server's Retry-After (at most ``max_retry_after_s``). ``transport``
    and ``sleep`` are for tests (an ``httpx.MockTransport``; a sleep that records instead of waiting).
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 max_attempts: int = 5, backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 max_retry_after_s: float = 120.0, temperature: float | None = None, max_tokens: int | None = None,
                 extra_body: dict[str, Any] | None = None, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_attempts = max_attempts
        self.backoff_s, self.max_backoff_s, self.max_retry_after_s = backoff_s, max_backoff_s, max_retry_after_s
        self.temperature, self.max_tokens = temperature, max_tokens
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep
        self._httpx, self._tenacity = httpx, tenacity = _client_modules()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), headers=headers, transport=transport)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after_s is not None:
            return min(exc.retry_after_s, self.max_retry_after_s)
        return self._tenacity.wait_exponential(multiplier=self.backoff_s, max=self.max_backoff_s)(state)

    def _attempt(self, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}/chat/completions"
        try:
            response = self._http.post(url, json=body)
        except self._httpx.TimeoutException as exc:
            raise _Retryable(f"timed out: {type(exc).__name__}") from exc
        except self._httpx.TransportError as exc:
            raise _Retryable(f"transport error: {type(exc).__name__}: {exc}") from exc
        if response.status_code in RETRY_STATUSES or response.status_code >= 500:
            raise _Retryable(f"HTTP {response.status_code}: {response.text[:200]}",
                             _retry_after(response.headers.get("retry-after")), response.status_code)
        if response.status_code >= 400:
            raise GeneratorError(f"{url} refused the request: HTTP {response.status_code}: {response.text[:300]}",
                                 response.status_code)
        try:
            data = response.json()
            data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise GeneratorError(f"{url} answered with something that is not a chat completion: "
                                 f"{response.text[:300]}", response.status_code) from exc
        return data

    def complete(self, messages: list[dict[str, str]], **overrides: Any) -> Completion:
        """One completion of ``messages``; ``overrides`` go into the request body (``temperature=0.2``)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.extra_body}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        body.update(overrides)
        started = time.perf_counter()
        tenacity = self._tenacity
        retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(self.max_attempts), wait=self._wait,
                                     sleep=self._sleep, retry=tenacity.retry_if_exception_type(_Retryable),
                                     reraise=True)
        try:
            data = retrying(self._attempt, body)
        except _Retryable as exc:
            raise GeneratorError(f"no completion from {self.base_url} after {self.max_attempts} attempts; last: {exc}",
                                 exc.status_code) from exc
        choice = data["choices"][0]
        prompt_hash = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        return Completion(text=choice["message"]["content"] or "", model=str(data.get("model", self.model)),
                          finish_reason=choice.get("finish_reason"), usage=dict(data.get("usage") or {}),
                          seconds=time.perf_counter() - started, attempts=retrying.statistics.get("attempt_number", 1),
                          prompt_sha256=prompt_hash, base_url=self.base_url)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_OPEN_FENCE = re.compile(r"^```[ \t]*(python|py)[^\n]*\n", re.MULTILINE)


def extract_code(text: str) -> str:
    """The candidate's source in a reply: the last fenced ``python`` block.

    Without a Python block, the last fenced block of any language; a reply cut off inside an open
    ```` ```python ```` fence gives what follows the fence; with no fence at all, the whole reply.
    """
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    python = [body for lang, body in blocks if lang in ("python", "py", "python3")]
    if python:
        return python[-1].strip("\n") + "\n"
    opened = list(_OPEN_FENCE.finditer(text))
    if opened and opened[-1].end() > (max((m.end() for m in _FENCE.finditer(text)), default=-1)):
        return text[opened[-1].end():].strip("\n") + "\n"
    if blocks:
        return blocks[-1][1].strip("\n") + "\n"
    return text.strip() + "\n"


def build_prompt(problem_source: str, feedback: list[str] | None = None, *, backend: str = "triton",
                 system: str = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """Chat messages asking for a ``ModelNew`` that replaces the problem's ``Model``.

    ``feedback``: what the gate said about earlier attempts, newest first (``VerdictLog.last_feedback``).
    """
    hint = _BACKEND_HINTS.get(backend, f"Write the kernels in {backend}.")
    parts = [
        "Here is a PyTorch reference model with its input generators:",
        f"```python\n{problem_source.strip()}\n```",
        "Write a new module that defines `class ModelNew(torch.nn.Module)` with the same constructor arguments "
        "and the same forward signature as `Model`, computing the same result with custom GPU kernels. Keep "
        "parameter names and shapes as in `Model`: the reference's weights are loaded into `ModelNew` with "
        f"`load_state_dict`. {hint} Do not call the PyTorch op being replaced.",
    ]
    if feedback:
        earlier = "\n".join(f"{i}. {text.strip()}" for i, text in enumerate(feedback, 1))
        parts.append(f"Earlier attempts were screened; what the screen said, newest first:\n{earlier}\n"
                     "Fix these problems in the new version.")
    parts.append("Reply with the complete module in one ```python code block.")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]
