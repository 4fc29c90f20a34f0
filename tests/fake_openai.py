"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, in a thread (no network).

Each request takes the next step of the script: a ``Reply`` (status, body, headers, delay) or a
function of the request's JSON body that returns one. Past the end of the script it answers 500.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Union


@dataclass
class Reply:
    status: int = 200
    body: Union[str, dict] = ""
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


def completion(text: str, model: str = "fake-coder") -> Reply:
    return Reply(200, {"id": "cmpl-1", "object": "chat.completion", "model": model,
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}})


Step = Union[Reply, Callable[[dict], Reply]]


class FakeChatServer:
    def __init__(self, script: list[Step]) -> None:
        self.script = list(script)
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.paths.append(self.path)
                    server.headers.append(dict(self.headers))
                    step = server.script.pop(0) if server.script else Reply(500, "script exhausted")
                reply = step(body) if callable(step) else step
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(payload.encode())))
                    self.end_headers()
                    self.wfile.write(payload.encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
