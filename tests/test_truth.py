"""benchmarks/truth.py, the independent labelling harness: it imports nothing from kernelgate (checked
in a fresh interpreter, through a real check), the label rule on synthetic timings, the fp64
comparison, the --check-only path in Triton's interpreter on a few entries (one of them wrong on
purpose), the refusal to label without a GPU, and the two corpus files."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import statistics
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import HAS_GPU, ROOT

TRUTH = ROOT / "benchmarks" / "truth.py"


@pytest.fixture(scope="module")
def truth():
    spec = importlib.util.spec_from_file_location("truth_bench", TRUTH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["truth_bench"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _run(args: list[str], timeout: float = 120, env_extra: dict | None = None, cwd=ROOT):
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


# ------------------------------------------------------------------ independence

def test_truth_imports_nothing_from_kernelgate_even_through_a_check(tmp_path):
    """Load truth.py and run one entry's fp64 check in-process (Triton interpreter): afterwards no
    kernelgate module is loaded, so neither truth.py nor what it imports pulls the gate in."""
    code = textwrap.dedent(f"""
        import importlib.util, os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        spec = importlib.util.spec_from_file_location("truth_probe", {str(TRUTH)!r})
        m = importlib.util.module_from_spec(spec); sys.modules["truth_probe"] = m; spec.loader.exec_module(m)
        assert "kernelgate" not in sys.modules, "import"
        entry = {{"name": "probe", "kernel": "examples/corpus_oos/triton/gelu_block1024.py", "dsl": "triton",
                  "problem": "gelu", "cpu_shape": {{"rows": 8, "cols": 64}}}}
        rec = m.run_entry(entry, check_only=True, lock_dir=None)
        assert rec["label"] == "correct", rec
        bad = sorted(k for k in sys.modules if k == "kernelgate" or k.startswith("kernelgate."))
        assert not bad, bad
        print("OK")
    """)
    r = _run(["-c", code], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("OK")


def test_truth_source_names_no_kernelgate_import():
    imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", TRUTH.read_text(), flags=re.M)
    assert imports and not [m for m in imports if m.split(".")[0] in ("kernelgate", "study", "reference_ops")]


# ------------------------------------------------------------------ the label rule

def _t(before, cand, after):
    return {"lib_before_ms": before, "cand_ms": cand, "lib_after_ms": after}


def test_label_efficient_and_inefficient_around_the_threshold(truth):
    assert truth.EFFICIENT_RATIO == 0.8
    at = truth.label_from(True, [_t(1.0, 1.25, 1.0)])  # ratio exactly 0.8
    assert at["label"] == "efficient" and math.isclose(at["ratio"], 0.8)
    below = truth.label_from(True, [_t(1.0, 1.2501, 1.0)])
    assert below["label"] == "inefficient" and below["ratio"] < 0.8
    fast = truth.label_from(True, [_t(2.0, 1.0, 2.18)])  # library mean 2.09
    assert fast["label"] == "efficient" and math.isclose(fast["ratio"], 2.09)
    assert math.isclose(fast["t_library_ms"], 2.09)


def test_label_unstable_library_is_retimed_once(truth):
    first = _t(1.0, 1.0, 1.11)  # 11% apart: unstable
    assert truth.spread(1.0, 1.11) > truth.UNSTABLE_SPREAD
    one = truth.label_from(True, [first])
    assert one["label"] == "unstable" and one.get("needs_retime") is True
    settled = truth.label_from(True, [first, _t(1.0, 2.0, 1.05)])  # second triple stable: it decides
    assert settled["label"] == "inefficient" and settled["decided_by_triple"] == 1
    assert math.isclose(settled["ratio"], 1.025 / 2.0)
    still = truth.label_from(True, [first, _t(1.0, 1.0, 1.2)])
    assert still["label"] == "unstable" and "needs_retime" not in still
    # just under 10% apart is stable
    assert truth.label_from(True, [_t(1.0, 1.0, 1.0999)])["label"] == "efficient"


def test_label_incorrect_and_bad_input(truth):
    assert truth.label_from(False, [])["label"] == "incorrect"
    assert truth.label_from(False, [_t(1, 1, 1)])["label"] == "incorrect"  # never timed into efficiency
    with pytest.raises(ValueError):
        truth.label_from(True, [])
    with pytest.raises(ValueError):
        truth.label_from(True, [_t(1.0, 0.0, 1.0)])
    with pytest.raises(ValueError):
        truth.label_from(True, [_t(1, 1, 1)] * 3)
    with pytest.raises(ValueError):
        truth.label_from(None, [])


def test_summarize_samples_median_is_do_bench_median(truth):
    samples = [0.5, 0.1, 0.3, 0.2, 0.4, 0.9]
    s = truth.summarize_samples(samples)
    assert s["median_ms"] == statistics.median(samples) and s["n"] == 6 and s["samples_ms"] == samples
    many = [float(i) for i in range(2001)]
    s = truth.summarize_samples(many)
    assert "samples_ms" not in s and len(s["percentiles_ms"]) == 101
    assert s["percentiles_ms"][50] == 1000.0 and s["quantiles_ms"]["0.9"] == 1800.0


def test_compare_fp64_tolerance(truth):
    import torch

    ref = torch.linspace(-2, 2, 101, dtype=torch.float64)
    rms = float(ref.pow(2).mean().sqrt())
    ok = truth.compare(torch, (ref * (1 + 5e-5)).float(), ref, "float32")
    assert ok["passed"], ok
    off = ref.clone()
    off[3] += 3e-4 * rms  # beyond 1e-4*|ref| + 1e-4*rms at |ref| <= 2
    assert not truth.compare(torch, off.float(), ref, "float32")["passed"]
    assert truth.compare(torch, off.half(), ref, "float16")["passed"]  # inside fp16's 1e-2
    nan = ref.clone().float()
    nan[0] = float("nan")
    assert not truth.compare(torch, nan, ref, "float32")["passed"]
    assert "shape" in truth.compare(torch, ref[:-1].float(), ref, "float32")["why"]


def test_problem_table_covers_the_corpus_problems(truth):
    assert set(truth.PROBLEMS) >= {"rowsum", "softmax", "layernorm", "rmsnorm", "matmul_fp32", "matmul_fp16",
                                   "matmul_bf16", "gelu", "conv2d_fp16", "sdpa_fp16"}
    assert truth.PROBLEMS["matmul_fp32"].matmul_fp32_strict


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

def test_corpus_files_load_and_the_oos_corpus_is_balanced(truth):
    existing = truth.load_corpus([ROOT / "benchmarks/corpus_existing.json"])
    assert len(existing) == 34
    oos = truth.load_corpus([ROOT / "examples/corpus_oos/manifest.json"])
    assert len(oos) >= 20
    assert {e["dsl"] for e in oos} == {"triton", "tilelang", "cuda"}
    assert {e["category"] for e in oos} == {"elementwise", "reduction/norm", "softmax", "gemm", "conv/attention"}
    intents = [e["intent"] for e in oos]
    assert abs(intents.count("efficient") - intents.count("inefficient")) <= 4
    for e in oos:
        doc = (ROOT / e["kernel"]).read_text()[:600]
        assert f"(intent: {e['intent']})" in doc, e["name"]
        assert e["gate_problem"]["dtype"] == truth.PROBLEMS[e["problem"]].dtype
    assert not {e["kernel"] for e in oos} & {e["kernel"] for e in existing}


def test_device_command_in_docstring_is_short_and_names_both_corpora():
    doc = TRUTH.read_text().split('"""')[1]
    block = doc.split("Device command")[1].split("\n\n")[1]  # the indented command after the heading
    assert all(line.startswith("    ") for line in block.splitlines())
    cmd = " ".join(line.strip().rstrip("\\") for line in block.splitlines())
    assert len(cmd) < 2000
    assert "benchmarks/corpus_existing.json" in cmd and "examples/corpus_oos/manifest.json" in cmd and "$OUT" in cmd
