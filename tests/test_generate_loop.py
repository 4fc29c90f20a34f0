"""examples/generate_loop.py end to end against a scripted chat server on loopback (no network)."""

from __future__ import annotations

import subprocess
import sys

from kernelgate.store import VerdictLog
from tests.conftest import EXAMPLES
from tests.fake_openai import FakeChatServer, Reply, completion

KB = EXAMPLES / "kernelbench"
PROBLEM = KB / "KernelBench" / "level1" / "1_Sum_over_last_dim.py"
WRONG = (KB / "runs" / "triton_demo" / "level_1_problem_1_sample_1_kernel.py").read_text()
GOOD = (KB / "runs" / "triton_demo" / "level_1_problem_1_sample_0_kernel.py").read_text()


def test_generate_screen_feed_back_keep_the_best(tmp_path):
    seen = []

    def second_round(body):
        seen.append(body["messages"][1]["content"])
        return completion(f"The sum dropped a column; fixed:\n```python\n{GOOD}```\n")

    script = [Reply(429, "rate limited", {"Retry-After": "0"}),
              completion(f"Here is a kernel.\n```python\n{WRONG}```\nIt should be fast."),
              second_round]
    out, logfile = tmp_path / "best.py", tmp_path / "loop.sqlite"
    with FakeChatServer(script) as server:
        proc = subprocess.run([sys.executable, str(EXAMPLES / "generate_loop.py"), "--base-url", server.base_url,
                               "--model", "fake-coder", "--problem", str(PROBLEM), "--rounds", "2",
                               "--log", str(logfile), "--batch", "loop-test", "--out", str(out)],
                              capture_output=True, text=True, timeout=300)
        first_prompt = server.requests[0]["messages"][1]["content"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "round 1: loop-test-round1: reject (numerics_mismatch)" in proc.stdout
    assert "round 2: loop-test-round2: untimed" in proc.stdout
    assert "Earlier attempts" not in first_prompt and "class Model(nn.Module)" in first_prompt
    assert "Rejected (numerics_mismatch)" in seen[0]  # round 1's feedback reached round 2's prompt
    assert out.read_text() == GOOD  # the best candidate, not the last reply's chatter
    with VerdictLog(logfile) as log:
        entries = log.entries(batch="loop-test")
    assert [e.verdict.status.value for e in entries] == ["reject", "untimed"]
    assert entries[0].generator["attempts"] == 2 and entries[0].generator["model"] == "fake-coder"
    assert entries[1].generator["round"] == 2 and entries[1].source == GOOD


def test_loop_exits_3_when_the_endpoint_gives_nothing(tmp_path):
    with FakeChatServer([Reply(401, '{"error": "no key"}')]) as server:
        proc = subprocess.run([sys.executable, str(EXAMPLES / "generate_loop.py"), "--base-url", server.base_url,
                               "--model", "m", "--problem", str(PROBLEM), "--rounds", "1",
                               "--log", str(tmp_path / "l.sqlite"), "--out", str(tmp_path / "b.py")],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and "HTTP 401" in proc.stderr and not (tmp_path / "b.py").exists()
