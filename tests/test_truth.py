"""benchmarks/truth.py, the independent labelling harness: it imports nothing from kernelgate (checked
in a fresh interpreter, through a real check), the label rule on synthetic timings, the fp64
comparison, the --check-only path in Triton's interpreter on a few entries (one of them wrong on
purpose), the refusal to label without a GPU, and the two corpus files.

Everything goes through truth.py's command line in subprocesses; nothing here imports it. Its pure
helpers, problem table and corpus loader are reached through the hidden ``truth.py _selftest``
subcommand (JSON requests on stdin, answers on stdout)."""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import sys

import pytest

from tests.conftest import HAS_GPU, ROOT

TRUTH = ROOT / "benchmarks" / "truth.py"


def _run(args: list[str], timeout: float = 120, env_extra: dict | None = None, cwd=ROOT, stdin: str | None = None):
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                          input=stdin)


def _selftest(*requests: dict, timeout: float = 120, env_extra: dict | None = None, cwd=ROOT) -> list[dict]:
    """``truth.py _selftest``: the answers to ``requests``, in order, from one fresh process; each
    ``{"value": ...}`` or ``{"error": "ValueError", "message": ...}``."""
    r = _run([str(TRUTH), "_selftest"], timeout=timeout, env_extra=env_extra, cwd=cwd, stdin=json.dumps(list(requests)))
    assert r.returncode == 0, r.stderr[-3000:]
    answers = json.loads(r.stdout)
    assert len(answers) == len(requests)
    return answers


def _value(request: dict, **kwargs):
    """The value of one request; fails the test if truth.py answered with an exception."""
    (answer,) = _selftest(request, **kwargs)
    assert "error" not in answer, answer
    return answer["value"]


def _error(request: dict) -> str:
    """The exception type truth.py raised for one request (fails the test if it raised none)."""
    (answer,) = _selftest(request)
    assert "error" in answer, f"expected an exception, got {answer}"
    return answer["error"]


def _label(correct, triples) -> dict:
    return _value({"op": "label", "correct": correct, "triples": triples})


def _compare(out: list, ref: list, dtype: str, out_dtype: str | None = None) -> dict:
    """A ``compare`` request: ``out`` is cast to ``out_dtype`` (default ``dtype``), ``ref`` held in float64."""
    return {"op": "compare", "out": out, "ref": ref, "dtype": dtype, "out_dtype": out_dtype or dtype}


# ------------------------------------------------------------------ independence

def test_truth_imports_nothing_from_kernelgate_even_through_a_check(tmp_path):
    """In one truth.py process (Triton interpreter): no kernelgate module is loaded after start-up, and
    none after one entry's fp64 check, so neither truth.py nor what it imports pulls the gate in.
    The probe is live: the same process reports torch and triton, which the check did load."""
    entry = {"name": "probe", "kernel": "examples/corpus_oos/triton/gelu_block1024.py", "dsl": "triton",
             "problem": "gelu", "cpu_shape": {"rows": 8, "cols": 64}}
    gate = {"op": "modules", "prefixes": ["kernelgate"]}
    at_start, checked, after, libs = _selftest(gate, {"op": "check_entry", "entry": entry}, gate,
                                               {"op": "modules", "prefixes": ["torch", "triton"]},
                                               env_extra={"TRITON_INTERPRET": "1"}, cwd=tmp_path)
    assert at_start == {"value": []}, "import"
    assert checked["value"]["label"] == "correct", checked
    assert after == {"value": []}, after
    assert "torch" in libs["value"] and "triton" in libs["value"]


def test_truth_source_names_no_kernelgate_import():
    imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", TRUTH.read_text(), flags=re.M)
    assert imports and not [m for m in imports if m.split(".")[0] in ("kernelgate", "study", "reference_ops")]


# ------------------------------------------------------------------ the label rule

def _t(before, cand, after):
    return {"lib_before_ms": before, "cand_ms": cand, "lib_after_ms": after}


def test_label_efficient_and_inefficient_around_the_threshold():
    assert _value({"op": "constants"})["EFFICIENT_RATIO"] == 0.8
    at = _label(True, [_t(1.0, 1.25, 1.0)])  # ratio exactly 0.8
    assert at["label"] == "efficient" and math.isclose(at["ratio"], 0.8)
    below = _label(True, [_t(1.0, 1.2501, 1.0)])
    assert below["label"] == "inefficient" and below["ratio"] < 0.8
    fast = _label(True, [_t(2.0, 1.0, 2.18)])  # library mean 2.09
    assert fast["label"] == "efficient" and math.isclose(fast["ratio"], 2.09)
    assert math.isclose(fast["t_library_ms"], 2.09)


def test_label_unstable_library_is_retimed_once():
    first = _t(1.0, 1.0, 1.11)  # 11% apart: unstable
    assert _value({"op": "spread", "a": 1.0, "b": 1.11}) > _value({"op": "constants"})["UNSTABLE_SPREAD"]
    one = _label(True, [first])
    assert one["label"] == "unstable" and one.get("needs_retime") is True
    settled = _label(True, [first, _t(1.0, 2.0, 1.05)])  # second triple stable: it decides
    assert settled["label"] == "inefficient" and settled["decided_by_triple"] == 1
    assert math.isclose(settled["ratio"], 1.025 / 2.0)
    still = _label(True, [first, _t(1.0, 1.0, 1.2)])
    assert still["label"] == "unstable" and "needs_retime" not in still
    # just under 10% apart is stable
    assert _label(True, [_t(1.0, 1.0, 1.0999)])["label"] == "efficient"


def test_label_incorrect_and_bad_input():
    assert _label(False, [])["label"] == "incorrect"
    assert _label(False, [_t(1, 1, 1)])["label"] == "incorrect"  # never timed into efficiency
    assert _error({"op": "label", "correct": True, "triples": []}) == "ValueError"
    assert _error({"op": "label", "correct": True, "triples": [_t(1.0, 0.0, 1.0)]}) == "ValueError"
    assert _error({"op": "label", "correct": True, "triples": [_t(1, 1, 1)] * 3}) == "ValueError"
    assert _error({"op": "label", "correct": None, "triples": []}) == "ValueError"


def test_selftest_refuses_an_unknown_op():
    r = _run([str(TRUTH), "_selftest"], stdin=json.dumps([{"op": "no_such_op"}]))
    assert r.returncode == 2 and "no_such_op" not in r.stdout and "op among" in r.stderr


def test_summarize_samples_median_is_do_bench_median():
    samples = [0.5, 0.1, 0.3, 0.2, 0.4, 0.9]
    s = _value({"op": "summarize", "samples": samples})
    assert s["median_ms"] == statistics.median(samples) and s["n"] == 6 and s["samples_ms"] == samples
    many = [float(i) for i in range(2001)]
    s = _value({"op": "summarize", "samples": many})
    assert "samples_ms" not in s and len(s["percentiles_ms"]) == 101
    assert s["percentiles_ms"][50] == 1000.0 and s["quantiles_ms"]["0.9"] == 1800.0


def test_compare_fp64_tolerance():
    ref = [-2.0 + 4.0 * i / 100 for i in range(101)]  # float64 values, as torch.linspace(-2, 2, 101)
    rms = math.sqrt(sum(v * v for v in ref) / len(ref))
    off = list(ref)
    off[3] += 3e-4 * rms  # beyond 1e-4*|ref| + 1e-4*rms at |ref| <= 2
    nan = list(ref)
    nan[0] = float("nan")
    answers = _selftest(  # one process (torch imports once)
        _compare([v * (1 + 5e-5) for v in ref], ref, "float32"),  # rounded to fp32 by truth.py
        _compare(off, ref, "float32"),
        _compare(off, ref, "float16"),  # inside fp16's 1e-2
        _compare(nan, ref, "float32"),
        _compare(ref[:-1], ref, "float32"))
    assert all("error" not in a for a in answers), answers
    ok, off32, off16, with_nan, short = (a["value"] for a in answers)
    assert ok["passed"] and ok["out_dtype"] == "float32", ok
    assert not off32["passed"]
    assert off16["passed"] and off16["out_dtype"] == "float16", off16
    assert not with_nan["passed"] and not with_nan["finite"]
    assert "shape" in short["why"]


def test_problem_table_covers_the_corpus_problems():
    problems = _value({"op": "problems"})
    assert set(problems) >= {"rowsum", "softmax", "layernorm", "rmsnorm", "matmul_fp32", "matmul_fp16",
                             "matmul_bf16", "gelu", "conv2d_fp16", "sdpa_fp16"}
    assert problems["matmul_fp32"]["matmul_fp32_strict"]


# ------------------------------------------------------------------ the CLI on this CPU

WRONG_SOFTMAX = '''"""Softmax without subtracting the row max: right on N(0,1) and U[0,1), overflows at x + 100."""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    e = tl.exp(tl.load(x_ptr + row * N + cols, mask=m, other=-float("inf")))
    tl.store(y_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=m)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _k[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
'''


def test_check_only_cli_on_small_entries(tmp_path):
    wrong = tmp_path / "softmax_no_max.py"
    wrong.write_text(WRONG_SOFTMAX)
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"entries": [
        {"name": "oos_gelu", "kernel": "examples/corpus_oos/triton/gelu_block1024.py", "dsl": "triton",
         "problem": "gelu", "cpu_shape": {"rows": 16, "cols": 256}},
        {"name": "existing_layernorm_good", "kernel": "examples/triton/layernorm_good.py", "dsl": "triton",
         "problem": "layernorm", "cpu_shape": {"BATCH": 8, "HIDDEN": 256}},
        {"name": "softmax_no_max", "kernel": str(wrong), "dsl": "triton", "problem": "softmax",
         "cpu_shape": {"ROWS": 4, "COLS": 128}},
        {"name": "tilelang_rowsum", "kernel": "examples/corpus_oos/tilelang/rowsum_rows4.py", "dsl": "tilelang",
         "problem": "rowsum"},
    ]}))
    out = tmp_path / "truth.json"
    r = _run([str(TRUTH), "--check-only", "--corpus", str(corpus), "--out", str(out), "--workers", "2"], timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(out.read_text())
    by = {e["name"]: e for e in data["entries"]}
    assert by["oos_gelu"]["label"] == "correct" and by["existing_layernorm_good"]["label"] == "correct"
    assert all(c["passed"] for c in by["existing_layernorm_good"]["library_check"].values())
    bad = by["softmax_no_max"]
    assert bad["label"] == "incorrect"
    assert bad["checks"]["normal"]["passed"] and bad["checks"]["uniform"]["passed"]
    assert not bad["checks"]["offset"]["passed"] and not bad["checks"]["offset"]["finite"]
    assert by["tilelang_rowsum"]["label"] == "skipped"
    assert data["meta"]["mode"] == "check_only" and data["meta"]["versions"]["torch"]
    assert len(by["oos_gelu"]["kernel_sha256"]) == 64


@pytest.mark.skipif(HAS_GPU, reason="checks the refusal on a machine without a GPU")
def test_labelling_without_a_gpu_exits_nonzero_with_a_message(tmp_path):
    r = _run([str(TRUTH), "--corpus", str(ROOT / "examples/corpus_oos/manifest.json"), "--only", "gelu_block1024",
              "--out", str(tmp_path / "t.json")])
    assert r.returncode == 3
    assert "no CUDA GPU" in r.stderr and "--check-only" in r.stderr
    assert not (tmp_path / "t.json").exists()


# ------------------------------------------------------------------ the corpora

def test_corpus_files_load_and_the_oos_corpus_is_balanced():
    existing, oos, problems = (a["value"] for a in _selftest(
        {"op": "load_corpus", "paths": [str(ROOT / "benchmarks/corpus_existing.json")]},
        {"op": "load_corpus", "paths": [str(ROOT / "examples/corpus_oos/manifest.json")]},
        {"op": "problems"}))
    assert len(existing) == 34
    assert len(oos) >= 20
    assert {e["dsl"] for e in oos} == {"triton", "tilelang", "cuda"}
    assert {e["category"] for e in oos} == {"elementwise", "reduction/norm", "softmax", "gemm", "conv/attention"}
    intents = [e["intent"] for e in oos]
    assert abs(intents.count("efficient") - intents.count("inefficient")) <= 4
    for e in oos:
        doc = (ROOT / e["kernel"]).read_text()[:600]
        assert f"(intent: {e['intent']})" in doc, e["name"]
        assert e["gate_problem"]["dtype"] == problems[e["problem"]]["dtype"]
    assert not {e["kernel"] for e in oos} & {e["kernel"] for e in existing}


def test_device_command_in_docstring_is_short_and_names_both_corpora():
    doc = TRUTH.read_text().split('"""')[1]
    block = doc.split("Device command")[1].split("\n\n")[1]  # the indented command after the heading
    assert all(line.startswith("    ") for line in block.splitlines())
    cmd = " ".join(line.strip().rstrip("\\") for line in block.splitlines())
    assert len(cmd) < 2000
    assert "benchmarks/corpus_existing.json" in cmd and "examples/corpus_oos/manifest.json" in cmd and "$OUT" in cmd
