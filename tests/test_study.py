"""benchmarks/study.py: the truth comes from the measurements, verdicts are decided again under other
thresholds, the fit chooses on one half and judges on the other; the corpus files exist; a CPU run."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from kernelgate.hardware import SPEC_TABLE, MathMode
from kernelgate.models import Metrics
from kernelgate.policy import DEFAULT_POLICY, Policy
from tests.conftest import ROOT

PEAKS = SPEC_TABLE["H200-SXM-141GB"]


@pytest.fixture(scope="module")
def study():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("study_bench", ROOT / "benchmarks" / "study.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["study_bench"] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _row(name: str, op: str, t_ms: float, t_lib_ms: float, *, half: str = "fit", bound: str = "memory",
         findings: tuple[tuple[str, str], ...] = (), u: float | None = None) -> dict:
    lre = t_lib_ms / t_ms
    u = 0.6 * lre if u is None else u
    metrics = Metrics(t_candidate_ms=t_ms, t_library_ms=t_lib_ms, lre=lre, lre_low=lre * 0.98, lre_high=lre * 1.02,
                      t_floor_ms=u * t_ms, u_candidate=u, u_library=u / lre, u_physics=u, bound=bound, flops=1e9,
                      bytes_compulsory=1e8, peaks=PEAKS, math_mode=MathMode.fp16)
    return {"name": name, "op": op, "dsl": "triton", "half": half, "correct": True, "t_candidate_ms": t_ms,
            "t_library_ms": t_lib_ms, "lre": lre, "u_candidate": u, "u_library": u / lre, "flops": 1e9, "bytes": 1e8,
            "status": "accept", "reason": None, "category": "x", "bound": bound,
            "findings": [{"code": c, "kind": k, "evidence": "e"} for c, k in findings],
            "metrics": metrics.model_dump(mode="json")}


def test_truth_comes_from_the_measurements(study):
    rows = [
        _row("norm_slow", "norm", 10.0, 1.0),                     # 10x behind: a variant fixes it -> repair
        _row("norm_fast", "norm", 1.05, 1.0),                     # near the library -> efficient
        _row("gemm_slow", "gemm", 4.0, 1.0, bound="compute"),     # a variant is 2x faster -> repair
        _row("gemm_best", "gemm", 2.0, 1.0, bound="compute"),     # best attempt still 2x behind -> structural
        _row("fast_but_beaten", "ew", 1.0, 2.0),                  # beats the library, but a variant is 2x faster
        _row("fastest", "ew", 0.5, 2.0),
    ]
    study.truth(rows)
    expected = {r["name"]: r["expected"] for r in rows}
    assert expected == {"norm_slow": "repair", "norm_fast": "accept", "gemm_slow": "repair",
                        "gemm_best": "structural", "fast_but_beaten": "repair", "fastest": "accept"}
    # a wrong kernel has no truth, and is no one's variant
    wrong = {**_row("wrong", "norm", 0.1, 1.0), "correct": False}
    rows.append(wrong)
    study.truth(rows)
    assert wrong["expected"] is None and expected["norm_fast"] == "accept"


def test_redecide_and_agreement_follow_the_policy(study):
    rows = [_row("slow", "norm", 10.0, 1.0, findings=(("serial_reduction", "repairable"),)),
            _row("fast", "norm", 1.0, 1.0),
            _row("gemm_slow", "gemm", 4.0, 1.0, bound="compute", findings=(("no_tensor_cores", "repairable"),)),
            _row("gemm_best", "gemm", 1.6, 1.0, bound="compute", findings=(("codegen_gap", "structural"),))]
    study.truth(rows)
    assert study.redecide(rows[0], DEFAULT_POLICY) == "repair"
    # the policy's own finding is dropped, so the threshold decides: LRE 0.625 is structural from 0.5, not from 0.7
    assert study.redecide(rows[3], DEFAULT_POLICY.model_copy(update={"structural_lre_min": 0.5})) == "structural"
    assert study.redecide(rows[3], DEFAULT_POLICY.model_copy(update={"structural_lre_min": 0.7})) == "repair"
    summary = study.agreement(rows, Policy(structural_lre_min=0.5))["summary"]
    assert summary == {"cases": 4, "agree": 4, "inefficient_flagged": 3, "inefficient": 3,
                       "efficient_accepted": 1, "efficient": 1}


def test_fit_chooses_on_one_half_and_judges_on_the_other(study):
    rows = [_row("a_best", "a", 1.6, 1.0, bound="compute", half="fit"),      # structural at LRE 0.625
            _row("a_slow", "a", 8.0, 1.0, bound="compute", half="fit"),
            _row("b_best", "b", 2.5, 1.0, bound="compute", half="judge"),    # structural at LRE 0.4
            _row("b_slow", "b", 9.0, 1.0, bound="compute", half="judge")]
    study.truth(rows)
    result = study.fit(rows)
    assert result["fit_agree"] == 2 and result["chosen"]["structural_lre_min"] <= 0.6
    assert result["judge"]["summary"]["cases"] == 2
    assert set(result) >= {"default_on_fit", "default_on_judge", "fit", "judge", "grid"}


def test_every_corpus_kernel_exists_and_each_op_has_a_pair_or_more(study):
    assert len(study.CORPUS) >= 24
    for case in study.CORPUS:
        assert (ROOT / "examples" / case.kernel).is_file(), case.kernel
    groups = {}
    for case in study.CORPUS:
        groups.setdefault((case.op, case.kernel.split("/")[0]), []).append(case)
    # a slow and an optimized kernel per op and DSL, then any further attempts; one half per op
    assert all(len(g) >= 2 and len({c.half for c in g}) == 1 for g in groups.values())
    assert {c.category for c in study.CORPUS} == {"normalization", "reduction/softmax", "gemm", "convolution",
                                                  "elementwise/attention"}
    assert {c.kernel.split("/")[0] for c in study.CORPUS} == {"triton", "tilelang"}


def test_plot_and_table_from_rows(study, tmp_path):
    rows = [_row("x_slow", "x", 4.0, 1.0), _row("x_fast", "x", 1.0, 1.0)]
    study.truth(rows)
    study.plot(rows, tmp_path / "roofline.png")
    assert (tmp_path / "roofline.png").read_bytes()[:4] == b"\x89PNG"
    table = study.markdown_table(rows)
    assert "| x_slow |" in table and "repair" in table


def test_cpu_run_screens_corpus_kernels(study, tmp_path):
    out = tmp_path / "study.json"
    assert study.main(["--only", "triton_gelu", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    names = {r["name"]: r for r in record["cases"]}
    assert set(names) == {"triton_gelu_slow", "triton_gelu_fast", "triton_gelu_autotuned"}
    assert all(r["correct"] for r in names.values())  # numerics in the interpreter
    assert "fp64_arithmetic" in {f["code"] for f in names["triton_gelu_slow"]["findings"]}
    assert record["command"].startswith("python benchmarks/study.py --only triton_gelu")
