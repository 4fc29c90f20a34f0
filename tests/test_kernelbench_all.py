"""benchmarks/kernelbench_all.py through its command line, on the CPU: ``--fake-gate`` screens with
kernelgate.testing.FakeRunner (no worker), so what is checked is the rest of the script: discovery,
the candidates it generates (run in Triton's interpreter), the footprints, the record and its
summary, a worker fault, a lane that cannot start, ``--resume``, and KernelBench's own eval in a
subprocess per candidate against a stand-in checkout.

The problem files are copies of three KernelBench problems (tests/fixtures/kernelbench_all, MIT);
the stand-in checkout adds a problem whose output is a tuple and a ``kernelbench`` package that
imports the LLM clients at module level as KernelBench's ``utils.py`` does.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from kernelgate import integrity
from kernelgate.dsl import detect_dsl
from tests.conftest import FIXTURES, ROOT

SCRIPT = ROOT / "benchmarks" / "kernelbench_all.py"
TUPLES = """\
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return (x > 0.5), (x * x).mean(), x.t()
def get_inputs():
    return [torch.rand(5, 7)]
def get_init_inputs():
    return []
"""
EVAL = """\
import json, sys, time
import torch
from . import utils

def get_torch_dtype_from_string(p):
    return {"fp32": torch.float32}[p]

class R:
    compiled, correctness, runtime, ref_runtime = True, True, 1.25, 2.5
    runtime_stats = {"mean": 1.25}
    ref_runtime_stats = {"mean": 2.5}

def eval_kernel_against_ref(ref, cand, **kw):
    assert "class Model" in ref and "class ModelNew" in cand
    if "nn.LayerNorm" in ref:  # hangs: killed at --kb-timeout-s
        print("drawing inputs", flush=True)
        time.sleep(120)
    if "nn.Conv2d" in ref:
        raise RuntimeError("CUDA error: no kernel image")
    r = R()
    r.metadata = {"hardware": "fake", "args": json.dumps({k: str(v) for k, v in kw.items()}),
                  "error": ValueError("not JSON")}
    return r
"""


def _run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("kb") / "checkout"
    shutil.copytree(FIXTURES / "kernelbench_all", root)
    (root / "KernelBench" / "level1" / "99_Tuples.py").write_text(TUPLES)
    package = root / "src" / "kernelbench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import utils\n")
    (package / "utils.py").write_text("from dotenv import load_dotenv\nload_dotenv()\nfrom openai import OpenAI\n"
                                      "from litellm import completion\n")
    (package / "eval.py").write_text(EVAL)
    return root


@pytest.fixture(scope="module")
def first_run(checkout, tmp_path_factory):
    """One call: the gate faked (a worker fault on 1/40), KernelBench's eval from the stand-in checkout."""
    folder = tmp_path_factory.mktemp("run")
    out, kept = folder / "results" / "all.json", folder / "candidates"
    done = _run("--kernelbench", str(checkout), "--out", str(out), "--fake-gate", "--fake-fault", "1/40",
                "--keep-candidates", str(kept), "--kernelbench-eval", "--kb-timeout-s", "12", "--gate-alone")
    return json.loads(out.read_text()), out, kept, done.stdout


def test_every_problem_gets_a_gate_record_and_a_fault_does_not_stop_the_loop(first_run):
    record, out, _, stdout = first_run
    problems = record["problems"]
    assert list(problems) == ["1/19", "1/40", "1/99", "2/1"]  # written sorted by level, then id
    assert "[plan] 4 problems selected; gate: 4 to screen; KernelBench eval: 4" in stdout
    relu = problems["1/19"]
    assert relu["candidate"]["kind"] == "real_kernel"
    assert relu["candidate"]["origin"].endswith("level_1_problem_3_sample_1_kernel.py")
    assert relu["gate"]["status"] == "reject" and relu["gate"]["reason"] == "library_op_used"
    assert relu["gate"]["candidate_sha256"] == relu["candidate"]["sha256"] and relu["gate"]["run"] == 0
    assert relu["gate"]["lane"] == "fake:0" and relu["gate"]["attempts"] == 1 and relu["gate"]["failure"]
    # the footprint at the shipped shape, sized on the meta device
    assert relu["footprint"]["shape"] == {"batch_size": 4096, "dim": 393216}
    assert relu["footprint"]["total_bytes"] == 2 * 4096 * 393216 * 4 and relu["footprint"]["error"] is None
    assert problems["2/1"]["candidate"]["kind"] == "wrapper_triton_copy" and problems["2/1"]["candidate"]["origin"] is None
    fault = problems["1/40"]["gate"]
    assert fault["status"] is None and "worker fault, twice" in fault["error"] and fault["attempts"] == 2
    s = record["summary"]
    assert s["problems"] == s["screened"] == 4 and s["by_status"] == {"gate_error": 1, "reject": 3}
    assert s["by_reason"] == {"library_op_used": 3} and s["gate_errors"] == ["1/40"] and s["out_of_memory"] == []
    assert s["by_candidate"] == {"real_kernel": 2, "wrapper_triton_copy": 2}
    assert s["median_stage_seconds"]["job"] == 0.5 and s["median_gate_seconds"] > 0
    header = record["runs"][0]
    assert header["selected"] == 4 and header["gate_todo"] == 4 and header["gate_screened"] == 4
    assert record["kernelbench"]["eval_settings"]["num_perf_trials"] == 100
    assert not list(out.parent.glob("*.tmp"))  # written whole, by rename


def test_kernelbench_eval_runs_from_the_checkout_in_a_child(first_run):
    from importlib.util import find_spec

    problems = first_run[0]["problems"]
    ok = problems["1/19"]["kernelbench_eval"]
    assert ok["finished"] and ok["exception"] is None, ok
    assert ok["placeholders"] == [m for m in ("dotenv", "openai", "litellm") if find_spec(m) is None]
    assert ok["compiled"] and ok["correctness"] and ok["runtime_ms"] == 1.25 and ok["ref_runtime_ms"] == 2.5
    args = json.loads(ok["metadata"]["args"])
    assert args["num_correct_trials"] == "5" and args["num_perf_trials"] == "100"
    assert args["timing_method"] == "cuda_event" and args["backend"] == "triton" and args["precision"] == "torch.float32"
    assert ok["metadata"]["error"] == "not JSON" and ok["same_candidate_as_gate"] is True
    hung = problems["1/40"]["kernelbench_eval"]
    assert hung["timed_out"] and not hung["finished"] and hung["error"] == "did not finish within 12 s"
    assert "drawing inputs" in hung["log_tail"]
    raised = problems["2/1"]["kernelbench_eval"]
    assert not raised["finished"] and raised["exception"].startswith("RuntimeError: CUDA error")
    assert "traceback_tail" in raised
    assert first_run[0]["summary"]["kernelbench_eval"] == {
        "run": 4, "finished": 2, "did_not_finish": 2, "compiled": 2, "correct": 2, "timed": 2,
        "median_seconds": first_run[0]["summary"]["kernelbench_eval"]["median_seconds"]}


def test_gate_alone_screens_each_candidate_again_beside_kernelbench(first_run):
    """``--gate-alone``: the same candidate, screened by itself just before KernelBench's eval of it."""
    record = first_run[0]
    for key, problem in record["problems"].items():
        alone = problem["gate_alone"]
        assert alone["status"] == "reject" and alone["reason"] == "library_op_used" and alone["error"] is None, key
        assert alone["candidate_sha256"] == problem["kernelbench_eval"]["candidate_sha256"] and alone["run"] == 0
        assert alone["seconds_wall"] >= 0
    s = record["summary"]["gate_alone"]
    assert s["both"] == 4 and s["gate_errors"] == 0 and 0 <= s["gate_faster"] <= 4
    assert s["gate_median_seconds"] is not None and s["kernelbench_median_seconds"] is not None


def test_generated_candidates_pass_the_static_checks_and_compute_the_reference(first_run):
    kept = first_run[2]
    paths = {p.name: p for p in kept.glob("*_candidate.py")}
    assert sorted(paths) == ["level1_19_ReLU_candidate.py", "level1_40_LayerNorm_candidate.py",
                             "level1_99_Tuples_candidate.py", "level2_1_Conv2D_ReLU_BiasAdd_candidate.py"]
    conv = paths["level2_1_Conv2D_ReLU_BiasAdd_candidate.py"].read_text()
    assert conv.startswith((FIXTURES / "kernelbench_all/KernelBench/level2/1_Conv2D_ReLU_BiasAdd.py")
                           .read_text().rstrip())  # the reference, unchanged, first
    for name, path in paths.items():
        source = path.read_text()
        assert detect_dsl(source) == "triton" and "class ModelNew" in source, name
        assert integrity.static_failure(integrity.scan(source)) is None, name
    code = textwrap.dedent("""
        import importlib.util, sys, torch

        def load(path, name):
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module

        folder = sys.argv[1]
        torch.manual_seed(0)
        conv = load(f"{folder}/level2_1_Conv2D_ReLU_BiasAdd_candidate.py", "conv")
        assert issubclass(conv.ModelNew, conv.Model)  # the reference's own class
        reference, candidate = conv.Model(3, 4, 3, (4, 1, 1)), conv.ModelNew(3, 4, 3, (4, 1, 1))
        candidate.load_state_dict(reference.state_dict())
        launches, kernel = [], conv._kg_copy_kernel

        class Counted:  # the module's launch site looks the kernel up at call time
            def __getitem__(self, grid):
                launches.append(grid)
                return kernel[grid]

        conv._kg_copy_kernel = Counted()
        x = torch.rand(2, 3, 8, 8)
        out, expected = candidate(x), reference(x)
        assert out.shape == (2, 4, 6, 6) and torch.equal(out, expected) and launches == [(1,)]

        relu = load(f"{folder}/level1_19_ReLU_candidate.py", "relu")
        x = torch.randn(4, 1000)
        assert torch.equal(relu.ModelNew()(x), torch.relu(x))
        ln = load(f"{folder}/level1_40_LayerNorm_candidate.py", "ln")
        x = torch.randn(3, 4, 8, 8)
        torch.testing.assert_close(ln.ModelNew((4, 8, 8))(x), torch.nn.LayerNorm((4, 8, 8))(x), atol=1e-5, rtol=1e-5)

        tuples = load(f"{folder}/level1_99_Tuples_candidate.py", "tuples")  # tuples, bools, scalars pass through
        x = torch.rand(5, 7)
        mask, loss, transposed = tuples.ModelNew()(x)
        assert mask.dtype == torch.bool and torch.equal(mask, x > 0.5)
        assert loss.dim() == 0 and torch.equal(loss, (x * x).mean())
        assert torch.equal(transposed, x.t()) and transposed.is_contiguous()
        print("checked")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}  # on before triton is first imported
    done = subprocess.run([sys.executable, "-c", code, str(kept)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("checked"), done.stderr[-3000:]


def test_resume_skips_what_is_recorded_and_redoes_a_changed_candidate(first_run, checkout, tmp_path):
    record = first_run[0]
    record["problems"]["1/19"]["gate"]["candidate_sha256"] = "made for another candidate"
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(record))
    out = tmp_path / "again.json"
    done = _run("--kernelbench", str(checkout), "--out", str(out), "--resume", str(earlier), "--fake-gate",
                "--retry-errors", "--levels", "1", "--only", "ReLU", "LayerNorm", "2/1")
    # 1/19: its candidate changed; 1/40: its gate faulted (--retry-errors); 2/1 is not selected (--levels 1)
    assert "[plan] 2 problems selected; gate: 2 to screen; KernelBench eval: 0" in done.stdout
    again = json.loads(out.read_text())
    assert len(again["runs"]) == 2 and again["runs"][1]["gate_screened"] == 2
    assert again["problems"]["1/40"]["gate"]["status"] == "reject" and again["problems"]["1/40"]["gate"]["run"] == 1
    assert again["problems"]["1/19"]["gate"]["candidate_sha256"] == again["problems"]["1/19"]["candidate"]["sha256"]
    assert again["problems"]["2/1"]["gate"]["run"] == 0  # kept from the earlier record
    assert again["summary"]["gate_errors"] == [] and again["summary"]["by_status"] == {"reject": 4}


def test_rescreen_redoes_a_recorded_verdict(first_run, checkout, tmp_path):
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(first_run[0]))
    out = tmp_path / "again.json"
    done = _run("--kernelbench", str(checkout), "--out", str(out), "--resume", str(earlier), "--fake-gate",
                "--levels", "1", "--rescreen", "1/19")
    assert "gate: 1 to screen" in done.stdout
    again = json.loads(out.read_text())
    assert again["problems"]["1/19"]["gate"]["run"] == 1 and again["problems"]["1/40"]["gate"]["run"] == 0
    out_all = tmp_path / "all.json"
    _run("--kernelbench", str(checkout), "--out", str(out_all), "--resume", str(earlier), "--fake-gate",
         "--levels", "1", "--rescreen", "all")
    runs = {k: p["gate"]["run"] for k, p in json.loads(out_all.read_text())["problems"].items()}
    assert {runs[k] for k in runs if k.startswith("1/")} == {1} and runs["2/1"] == 0  # level 2 not selected


def test_a_lane_that_cannot_start_is_retried_then_recorded(checkout, tmp_path):
    out = tmp_path / "broken.json"
    _run("--kernelbench", str(checkout), "--out", str(out), "--fake-gate", "broken", "--only", "1/19", "2/1")
    record = json.loads(out.read_text())
    assert len(record["runs"][0]["gate_loop_faults"]) == 2
    assert sorted(record["problems"]) == ["1/19", "2/1"]
    for problem in record["problems"].values():
        assert problem["gate"]["status"] is None
        assert "gate loop fault, twice: attempt 2: RuntimeError: lane cannot start" in problem["gate"]["error"]


def test_every_real_kernel_in_the_map_exists():
    """REAL_KERNELS, read from the script's source: each names a ModelNew of this repository."""
    tree = ast.parse(SCRIPT.read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "REAL_KERNELS"]
    real = ast.literal_eval(node.value)
    assert len(real) >= 5
    for (level, name), origin in real.items():
        assert level in (1, 2) and name.endswith(".py")
        assert "class ModelNew" in (ROOT / origin).read_text(), origin


def test_over_budget_reasons_come_from_the_record():
    import importlib.util
    spec = importlib.util.spec_from_file_location("kernelbench_all", ROOT / "benchmarks" / "kernelbench_all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernelbench_all"] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["kernelbench_all"]
    mib = 1 << 20
    small = {"memory": {"memory.footprint_bytes": 24 * mib, "memory.reference_fp64_peak_bytes": 3900 * mib}}
    assert module.over_budget_why(small) == ("footprint 24 MiB, at most keep_alive_bytes: buffers kept alive; "
                                             "the fp64 reference's own call allocated 162.5x the footprint")
    large = {"memory": {"memory.footprint_bytes": 4096 * mib, "memory.reference_fp64_peak_bytes": 8192 * mib}}
    assert module.over_budget_why(large) == "not explained by the record"
