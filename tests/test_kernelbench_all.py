"""benchmarks/kernelbench_all.py and the footprint helpers of kernelgate.adapters.kernelbench.

The three KernelBench problem files under tests/fixtures/kernelbench_all/KernelBench are copies
(KernelBench is MIT, its licence beside them), at their shipped shapes: a 4096 x 393216 ReLU
(6.4 GB of input) must be sized without being allocated.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import subprocess
import sys
import textwrap
import time

import pytest
from kernelgate.adapters import kernelbench as kb

from kernelgate import Reason
from kernelgate.errors import ProblemError, WorkerError
from tests import canned
from tests.conftest import FIXTURES, ROOT

CHECKOUT = FIXTURES / "kernelbench_all"
RELU = CHECKOUT / "KernelBench" / "level1" / "19_ReLU.py"
LAYERNORM = CHECKOUT / "KernelBench" / "level1" / "40_LayerNorm.py"
CONV = CHECKOUT / "KernelBench" / "level2" / "1_Conv2D_ReLU_BiasAdd.py"


@pytest.fixture(scope="module")
def bench():
    sys.path[:0] = [str(ROOT / "benchmarks")]
    spec = importlib.util.spec_from_file_location("kernelbench_all_bench", ROOT / "benchmarks" / "kernelbench_all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernelbench_all_bench"] = module
    spec.loader.exec_module(module)
    return module


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_problem(folder, name, body):
    path = folder / name
    path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
    return path


# --- footprint on the meta device -------------------------------------------------------------


def test_footprint_of_a_shipped_shape_is_sized_without_allocating_it():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    fp = kb.problem_footprint(RELU)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert fp.shape == {"batch_size": 4096, "dim": 393216}
    assert [(t.shape, t.dtype) for t in fp.inputs] == [([4096, 393216], "float32")]
    assert fp.input_bytes == fp.output_bytes == 4096 * 393216 * 4
    assert fp.parameter_bytes == 0 and fp.error is None
    assert fp.total_bytes == 2 * 4096 * 393216 * 4
    assert grown_kib < 1 << 20  # under 1 GiB: the 6.4 GB input was never made

    conv = kb.problem_footprint(CONV)
    assert conv.shape["height"] == conv.shape["width"] == 128 and conv.shape["out_channels"] == 128
    assert conv.parameter_bytes == ((128 * 64 * 3 * 3 + 128) + 128) * 4  # conv weight and bias, the extra bias
    assert [o.shape for o in conv.outputs] == [[128, 128, 126, 126]]
    assert conv.output_bytes == 128 * 128 * 126 * 126 * 4

    small = kb.problem_footprint(RELU, {"batch_size": 2, "dim": 8})
    assert small.input_bytes == 64 and small.shape == {"batch_size": 2, "dim": 8}
    with pytest.raises(ProblemError, match="no integer global rows"):
        kb.problem_footprint(RELU, {"rows": 2})


def test_footprint_reports_what_meta_cannot_run(tmp_path):
    eager = _tiny_problem(tmp_path, "cpu_inputs.py", """
        class Model(nn.Module):
            def forward(self, x, s):
                return x * s
        n = 16
        def get_inputs():
            return [torch.rand(n, device="cpu"), 3.0]
        def get_init_inputs():
            return []
    """)
    fp = kb.problem_footprint(eager)
    assert fp.input_bytes == 64 and "off the meta device" in fp.error and "cpu" in fp.error
    data_dependent = _tiny_problem(tmp_path, "item.py", """
        class Model(nn.Module):
            def forward(self, x):
                return x[: int(x.sum().item())]
        n = 16
        def get_inputs():
            return [torch.rand(n)]
        def get_init_inputs():
            return []
    """)
    fp = kb.problem_footprint(data_dependent)
    assert fp.input_bytes == 64 and fp.output_bytes is None and fp.error.startswith("forward failed on the meta device")
    broken = _tiny_problem(tmp_path, "broken.py", """
        class Model(nn.Module):
            pass
        def get_inputs():
            return [torch.rand(4).numpy()]
        def get_init_inputs():
            return []
    """)
    with pytest.raises(ProblemError, match="get_inputs\\(\\) failed on the meta device"):
        kb.problem_footprint(broken)


def test_check_footprint_names_shape_and_the_globals_and_shrinks_to_fit():
    limit = 256 << 20
    with pytest.raises(ProblemError) as caught:
        kb.check_footprint(RELU, None, limit, factor=4)
    message = str(caught.value)
    assert "--shape NAME=INT" in message and "batch_size=4096 dim=393216" in message
    assert "12.88 GB" in message and "For example: --shape" in message
    assert kb.check_footprint(RELU, {"batch_size": 16}, limit, factor=4).input_bytes == 16 * 393216 * 4

    fitted, fp = kb.shrink_shape(RELU, limit // 4)
    assert fp.total_bytes <= limit // 4 and set(fitted) <= {"batch_size", "dim"}
    assert kb.problem_footprint(RELU, fitted).total_bytes == fp.total_bytes
    # both knobs shrink in turn, neither is driven down alone
    assert fitted["batch_size"] > 1 and fitted["dim"] > 1
    # a conv problem: what it shrinks still builds and runs on meta (bias_shape is fixed at import,
    # so halving out_channels would break forward and is never chosen)
    fitted, fp = kb.shrink_shape(CONV, 64 << 20)
    assert fp.total_bytes <= 64 << 20 and fp.error is None and "out_channels" not in fitted
    assert kb.shrink_shape(RELU, 1 << 40) == ({}, kb.problem_footprint(RELU))


# --- candidates -------------------------------------------------------------------------------


def _interpret(code: str, **paths) -> None:
    """Run ``code`` in a fresh Python with the Triton interpreter on (it must be on before triton is
    first imported), ``paths`` bound as names; its assertions fail the test."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    prelude = "import importlib.util, torch\n" + "".join(f"{k} = {str(v)!r}\n" for k, v in paths.items()) + \
        textwrap.dedent("""
        def load(path, name):
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        """)
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code) + "\nprint('checked')"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("checked"), done.stderr[-3000:]


def test_candidates_import_and_compute_the_reference(bench, tmp_path):
    entries = bench.discover(CHECKOUT, [1, 2])
    assert [(e.key, e.path.name) for e in entries] == [
        ("1/19", "19_ReLU.py"), ("1/40", "40_LayerNorm.py"), ("2/1", "1_Conv2D_ReLU_BiasAdd.py")]
    assert [e.key for e in bench.discover(CHECKOUT, [1, 2], ["LayerNorm", "2/1"])] == ["1/40", "2/1"]
    generated = {e.key: bench.generate(e, tmp_path) for e in entries}
    assert generated["1/19"].kind == generated["1/40"].kind == "real_kernel"
    assert generated["1/19"].origin.endswith("level_1_problem_3_sample_1_kernel.py")
    assert generated["2/1"].kind == "wrapper_triton_copy" and generated["2/1"].origin is None
    assert generated["2/1"].source.startswith(CONV.read_text().rstrip())  # the reference, unchanged, first

    from kernelgate import integrity
    from kernelgate.dsl import detect_dsl

    for key, g in generated.items():
        assert detect_dsl(g.source) == "triton"
        assert integrity.static_failure(integrity.scan(g.source)) is None, key
        module = _import(g.path, f"kb_all_candidate_{key.replace('/', '_')}")
        assert isinstance(module.ModelNew, type)

    _interpret("""
        torch.manual_seed(0)
        conv = load(CONV, "conv")
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

        relu = load(RELU, "relu")
        x = torch.randn(4, 1000)
        assert torch.equal(relu.ModelNew()(x), torch.relu(x))
        ln = load(LN, "ln")
        x = torch.randn(3, 4, 8, 8)
        torch.testing.assert_close(ln.ModelNew((4, 8, 8))(x), torch.nn.LayerNorm((4, 8, 8))(x), atol=1e-5, rtol=1e-5)
    """, CONV=generated["2/1"].path, RELU=generated["1/19"].path, LN=generated["1/40"].path)


def test_wrapper_passes_tuples_bools_and_scalars_through_the_copy(bench, tmp_path):
    path = tmp_path / "tuple_candidate.py"
    path.write_text(bench.wrapper_source(textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return (x > 0.5), (x * x).mean(), x.t()
        def get_inputs():
            return [torch.rand(5, 7)]
        def get_init_inputs():
            return []
    """)))
    _interpret("""
        module = load(PATH, "tuples")
        x = torch.rand(5, 7)
        mask, loss, transposed = module.ModelNew()(x)
        assert mask.dtype == torch.bool and torch.equal(mask, x > 0.5)
        assert loss.dim() == 0 and torch.equal(loss, (x * x).mean())
        assert torch.equal(transposed, x.t()) and transposed.is_contiguous()
    """, PATH=path)


def test_every_real_kernel_in_the_map_exists(bench):
    for (level, name), origin in bench.REAL_KERNELS.items():
        assert level in (1, 2) and name.endswith(".py")
        assert "class ModelNew" in (ROOT / origin).read_text(), origin


# --- the record, the plan, resuming ----------------------------------------------------------


def _entries(bench):
    return bench.discover(CHECKOUT, [1, 2])


def test_plan_resumes_from_a_partial_record(bench):
    entries = _entries(bench)
    record = {"runs": [{}], "problems": {
        "1/19": {"gate": {"status": "reject", "reason": "library_op_used", "candidate_sha256": "a"},
                 "kernelbench_eval": {"finished": True, "candidate_sha256": "a"}},
        "1/40": {"gate": {"status": None, "error": "worker fault, twice", "candidate_sha256": "b"},
                 "kernelbench_eval": {"finished": False, "exception": "ImportError", "candidate_sha256": "b"}},
    }}
    gate, kbe = bench.plan(entries, record, kb_eval=True)
    assert [e.key for e in gate] == ["2/1"] and [e.key for e in kbe] == ["2/1"]
    gate, kbe = bench.plan(entries, record, kb_eval=True, retry_errors=True)
    assert [e.key for e in gate] == ["1/40", "2/1"] and [e.key for e in kbe] == ["1/40", "2/1"]
    gate, kbe = bench.plan(entries, record, kb_eval=False, limit=0)
    assert gate == [] and kbe == []
    # a record made for another candidate does not count
    gate, kbe = bench.plan(entries, record, kb_eval=True, shas={"1/19": "changed", "1/40": "b", "2/1": "c"})
    assert [e.key for e in gate] == ["1/19", "2/1"] and [e.key for e in kbe] == ["1/19", "2/1"]
    # a KernelBench timeout is a result: not redone
    record["problems"]["1/40"]["kernelbench_eval"] = {"finished": False, "timed_out": True, "candidate_sha256": "b"}
    assert [e.key for e in bench.plan(entries, record, kb_eval=True, retry_errors=True)[1]] == ["2/1"]
    # with limit, only problems screened now or earlier are due for KernelBench's eval
    gate, kbe = bench.plan(entries, {"runs": [], "problems": {}}, kb_eval=True, limit=1)
    assert [e.key for e in gate] == ["1/19"] and [e.key for e in kbe] == ["1/19"]


def test_record_is_written_whole_and_summarized(bench, tmp_path):
    out = tmp_path / "results" / "all.json"
    assert bench.load_record(out) == {"runs": [], "problems": {}}
    record = {"runs": [{"command": "x"}], "problems": {
        "1/10": {"candidate": {"kind": "wrapper_triton_copy"},
                 "gate": {"status": "reject", "reason": "library_op_used", "error": None,
                          "seconds": {"numerics": 2.0, "total": 4.0}, "peak_over_footprint": {"memory.a_peak_bytes": 3.0}},
                 "kernelbench_eval": {"finished": True, "compiled": True, "correctness": True, "runtime_ms": 1.5,
                                      "seconds_wall": 20.0}},
        "1/9": {"candidate": {"kind": "real_kernel"},
                "gate": {"status": "reject", "reason": "out_of_memory", "error": None, "seconds": {"total": 8.0}},
                "kernelbench_eval": {"finished": False, "timed_out": True, "seconds_wall": 60.0}},
        "2/1": {"candidate": {"kind": "wrapper_triton_copy"},
                "gate": {"status": None, "reason": None, "error": "internal fault: boom"}},
    }}
    bench.write_record(record, out)
    back = json.loads(out.read_text())
    assert list(back["problems"]) == ["1/9", "1/10", "2/1"]
    s = back["summary"]
    assert s["by_status"] == {"gate_error": 1, "reject": 2} and s["gate_errors"] == ["2/1"]
    assert s["out_of_memory"] == ["1/9"] and s["by_candidate"] == {"real_kernel": 1, "wrapper_triton_copy": 2}
    assert s["median_gate_seconds"] == 6.0 and s["median_stage_seconds"] == {"numerics": 2.0, "total": 6.0}
    assert s["peak_over_footprint_max"] == 3.0
    assert s["kernelbench_eval"] == {"run": 2, "finished": 1, "did_not_finish": 1, "compiled": 1, "correct": 1,
                                     "timed": 1, "median_seconds": 40.0}
    assert not list(out.parent.glob("*.tmp")) and bench.load_record(out)["problems"].keys() == back["problems"].keys()


def test_memory_fields_are_read_from_whatever_the_verdict_carries(bench):
    dump = {"metrics": {"peaks": {"fp32_tflops": 51.3, "peak_source": 1}, "lre": 1.0},
            "memory": {"footprint_bytes": 100, "judge_peak_bytes": 350, "candidate_peak_bytes": 210,
                       "judge_peak_by_phase": {"numerics": 300}},
            "kernels": [{"peak_registers": 3}]}
    fields = bench.memory_fields(dump)
    assert fields == {"memory.footprint_bytes": 100, "memory.judge_peak_bytes": 350,
                      "memory.candidate_peak_bytes": 210, "memory.judge_peak_by_phase.numerics": 300,
                      "kernels[0].peak_registers": 3}
    assert bench.peak_ratios(fields, 1000) == {"memory.judge_peak_bytes": 3.5, "memory.candidate_peak_bytes": 2.1}
    assert bench.peak_ratios({"memory.judge_peak_bytes": 500}, 1000) == {"memory.judge_peak_bytes": 0.5}
    assert bench.peak_ratios({}, 1000) == {} and bench.memory_fields({"metrics": {"lre": 2}}) == {}


class _Lane:
    """A lane with canned measurements: a reject for every candidate, a worker fault for ``faulty``."""

    def __init__(self, faulty: str | None = None, broken: bool = False) -> None:
        self.name, self.faulty, self.broken = "fake:0", faulty, broken

    def start(self) -> None:
        if self.broken:
            raise RuntimeError("lane cannot start")

    def run(self, job):
        if job.candidate.name == self.faulty:
            raise WorkerError("worker failed to start: canned")
        return canned.CannedRunner(canned.measurement(None, failure=Reason.library_op_used)).run(job)

    def close(self) -> None:
        pass


def _gate_setup(bench, tmp_path):
    entries = _entries(bench)
    generated = {e.key: bench.generate(e, tmp_path) for e in entries}
    record = {"runs": [{}], "problems": {e.key: {"footprint": {"total_bytes": 1000}} for e in entries}}
    return entries, generated, record


def test_gate_loop_records_every_problem_and_goes_on_after_a_fault(bench, tmp_path):
    entries, generated, record = _gate_setup(bench, tmp_path)
    out = tmp_path / "out.json"
    lines = []
    done = bench.screen_gate(entries, generated, record, out, options=None, concurrency=None, deadline=None,
                             run_index=0, screen_kwargs={"lanes": [_Lane(faulty="kb_level1_40_LayerNorm")]},
                             log=lines.append)
    assert sorted(done) == ["1/19", "1/40", "2/1"] and len(lines) == 3
    back = json.loads(out.read_text())["problems"]
    assert back["1/19"]["gate"]["status"] == "reject" and back["1/19"]["gate"]["reason"] == "library_op_used"
    assert back["1/19"]["gate"]["candidate_sha256"] == generated["1/19"].sha256
    assert "failure" in back["2/1"]["gate"] and back["2/1"]["gate"]["run"] == 0
    assert back["1/40"]["gate"]["status"] is None and "worker fault, twice" in back["1/40"]["gate"]["error"]
    assert back["1/40"]["gate"]["attempts"] == 2


def test_gate_loop_fault_is_retried_then_recorded(bench, tmp_path):
    entries, generated, record = _gate_setup(bench, tmp_path)
    out = tmp_path / "out.json"
    done = bench.screen_gate(entries, generated, record, out, options=None, concurrency=None, deadline=None,
                             run_index=0, screen_kwargs={"lanes": [_Lane(broken=True)]}, log=lambda _: None)
    assert sorted(done) == ["1/19", "1/40", "2/1"]
    assert len(record["runs"][0]["gate_loop_faults"]) == 2
    for key in done:
        assert "gate loop fault, twice: attempt 2: RuntimeError: lane cannot start" in record["problems"][key]["gate"]["error"]
    # past the deadline nothing starts and nothing is recorded: the next call resumes
    entries, generated, record = _gate_setup(bench, tmp_path)
    assert bench.screen_gate(entries, generated, record, out, options=None, concurrency=None,
                             deadline=time.monotonic() - 1, run_index=0, screen_kwargs={"lanes": [_Lane()]}) == []
    assert all("gate" not in p for p in record["problems"].values())


# --- KernelBench's eval in a subprocess -------------------------------------------------------


def test_kernelbench_eval_that_does_not_finish_is_killed_and_recorded(bench, tmp_path):
    began = time.monotonic()
    out = bench.run_kb_eval(tmp_path, RELU, RELU, 1.0, tmp_path / "w",
                            command=[sys.executable, "-c", "import time; print('drawing inputs', flush=True); time.sleep(60)"])
    assert time.monotonic() - began < 30
    assert out["timed_out"] and not out["finished"] and out["error"] == "did not finish within 1 s"
    assert "drawing inputs" in out["log_tail"]
    out = bench.run_kb_eval(tmp_path, RELU, RELU, 10.0, tmp_path / "w", command=[sys.executable, "-c", "raise SystemExit(3)"])
    assert out["returncode"] == 3 and not out["finished"] and out["error"] == "no result (exit code 3)"


def test_kernelbench_child_imports_the_checkout_and_reports_its_result(bench, tmp_path):
    """A checkout whose ``kernelbench`` package imports the LLM clients at module level, as
    KernelBench's ``utils.py`` does; its eval stands in for KernelBench's and records its arguments."""
    package = tmp_path / "checkout" / "src" / "kernelbench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import utils\n")
    (package / "utils.py").write_text("from dotenv import load_dotenv\nload_dotenv()\nfrom openai import OpenAI\n"
                                      "from litellm import completion\n")
    (package / "eval.py").write_text(textwrap.dedent("""
        import json, os
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
            r = R()
            r.metadata = {"hardware": "fake", "args": json.dumps({k: str(v) for k, v in kw.items()}),
                          "error": ValueError("not JSON")}
            return r
    """))
    from importlib.util import find_spec

    missing = [m for m in ("dotenv", "openai", "litellm") if find_spec(m) is None]
    gen = bench.generate(bench.discover(CHECKOUT, [2])[0], tmp_path)
    out = bench.run_kb_eval(tmp_path / "checkout", CONV, gen.path, 60.0, tmp_path / "w")
    assert out["finished"] and out["exception"] is None, out
    assert out["placeholders"] == missing
    assert out["compiled"] and out["correctness"] and out["runtime_ms"] == 1.25 and out["ref_runtime_ms"] == 2.5
    args = json.loads(out["metadata"]["args"])
    assert args["num_correct_trials"] == "5" and args["num_perf_trials"] == "100"
    assert args["timing_method"] == "cuda_event" and args["backend"] == "triton" and args["precision"] == "torch.float32"
    assert out["metadata"]["error"] == "not JSON" and out["seconds_eval"] >= 0
    # the same checkout without an eval function: the exception is the record
    (package / "eval.py").write_text("from . import utils\n")
    out = bench.run_kb_eval(tmp_path / "checkout", CONV, gen.path, 60.0, tmp_path / "w")
    assert not out["finished"] and out["exception"].startswith("AttributeError") and "traceback_tail" in out


def test_fixture_copies_carry_kernelbench_licence():
    assert "MIT License" in (CHECKOUT / "LICENSE-KernelBench").read_text()
    assert kb.dataset_dir(CHECKOUT) == CHECKOUT / "KernelBench"
