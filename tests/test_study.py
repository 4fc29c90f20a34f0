"""benchmarks/study.py through its command line: the truth comes from the measurements, verdicts are
decided again under other thresholds, the fit chooses on one half and judges on the other (``--rows``
on synthetic measurements); the corpus files exist (``--list-corpus``); a CPU run screens some."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kernelgate.hardware import SPEC_TABLE, MathMode
from kernelgate.models import Metrics
from tests.conftest import ROOT

PEAKS = SPEC_TABLE["H200-SXM-141GB"]
SCRIPT = ROOT / "benchmarks" / "study.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _redo(tmp_path, rows: list[dict], *args: str) -> dict:
    """``--rows``: the study decided again from these rows; the record it writes."""
    path, out = tmp_path / "rows.json", tmp_path / "re.json"
    path.write_text(json.dumps(rows))
    _run("--rows", str(path), "--out", str(out), *args)
    return json.loads(out.read_text())


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


def test_truth_comes_from_the_measurements(tmp_path):
    rows = [
        _row("norm_slow", "norm", 10.0, 1.0),                     # 10x behind: a variant fixes it -> repair
        _row("norm_fast", "norm", 1.05, 1.0),                     # near the library -> efficient
        _row("gemm_slow", "gemm", 4.0, 1.0, bound="compute"),     # a variant is 2x faster -> repair
        _row("gemm_best", "gemm", 2.0, 1.0, bound="compute"),     # best attempt still 2x behind -> structural
        _row("fast_but_beaten", "ew", 1.0, 2.0),                  # beats the library, but a variant is 2x faster
        _row("fastest", "ew", 0.5, 2.0),
        {**_row("wrong", "norm", 0.1, 1.0), "correct": False},    # no truth, and no one's variant
    ]
    record = _redo(tmp_path, rows)
    expected = {r["name"]: r["expected"] for r in record["cases"]}
    assert expected == {"norm_slow": "repair", "norm_fast": "accept", "gemm_slow": "repair",
                        "gemm_best": "structural", "fast_but_beaten": "repair", "fastest": "accept", "wrong": None}


def test_redecide_and_agreement_follow_the_policy(tmp_path):
    rows = [_row("slow", "norm", 10.0, 1.0, findings=(("serial_reduction", "repairable"),)),
            _row("fast", "norm", 1.0, 1.0),
            _row("gemm_slow", "gemm", 4.0, 1.0, bound="compute", findings=(("no_tensor_cores", "repairable"),)),
            _row("gemm_best", "gemm", 1.6, 1.0, bound="compute", findings=(("codegen_gap", "structural"),))]
    lenient = _redo(tmp_path, rows, "--policy", '{"structural_lre_min": 0.5}')
    verdicts = {c["name"]: c["verdict"] for c in lenient["agreement_policy"]["cases"]}
    assert verdicts["slow"] == "repair"
    # the policy's own finding is dropped, so the threshold decides: LRE 0.625 is structural from 0.5, not from 0.7
    assert verdicts["gemm_best"] == "structural"
    assert lenient["policy"]["structural_lre_min"] == 0.5
    assert lenient["agreement_policy"]["summary"] == {"cases": 4, "agree": 4, "inefficient_flagged": 3,
                                                      "inefficient": 3, "efficient_accepted": 1, "efficient": 1}
    strict = _redo(tmp_path, rows, "--policy", '{"structural_lre_min": 0.7}')
    assert {c["name"]: c["verdict"] for c in strict["agreement_policy"]["cases"]}["gemm_best"] == "repair"


def test_fit_chooses_on_one_half_judges_on_the_other_and_draws(tmp_path):
    rows = [_row("a_best", "a", 1.6, 1.0, bound="compute", half="fit"),      # structural at LRE 0.625
            _row("a_slow", "a", 8.0, 1.0, bound="compute", half="fit"),
            _row("b_best", "b", 2.5, 1.0, bound="compute", half="judge"),    # structural at LRE 0.4
            _row("b_slow", "b", 9.0, 1.0, bound="compute", half="judge")]
    record = _redo(tmp_path, rows, "--plot", str(tmp_path / "roofline.png"), "--table", str(tmp_path / "t.md"))
    result = record["fit"]
    assert result["fit_agree"] == 2 and result["chosen"]["structural_lre_min"] <= 0.6
    assert result["judge"]["summary"]["cases"] == 2
    assert set(result) >= {"default_on_fit", "default_on_judge", "fit", "judge", "grid"}
    assert (tmp_path / "roofline.png").read_bytes()[:4] == b"\x89PNG"
    table = (tmp_path / "t.md").read_text()
    assert "| a_slow |" in table and "repair" in table


def test_every_corpus_kernel_exists_and_each_op_has_a_pair_or_more():
    corpus = json.loads(_run("--list-corpus").stdout)
    assert len(corpus) >= 24
    for case in corpus:
        assert (ROOT / "examples" / case["kernel"]).is_file(), case["kernel"]
    groups = {}
    for case in corpus:
        groups.setdefault((case["op"], case["kernel"].split("/")[0]), []).append(case)
    # a slow and an optimized kernel per op and DSL, then any further attempts; one half per op
    assert all(len(g) >= 2 and len({c["half"] for c in g}) == 1 for g in groups.values())
    assert {c["category"] for c in corpus} == {"normalization", "reduction/softmax", "gemm", "convolution",
                                               "elementwise/attention"}
    assert {c["kernel"].split("/")[0] for c in corpus} == {"triton", "tilelang"}


def test_cpu_run_screens_corpus_kernels(tmp_path):
    out = tmp_path / "study.json"
    _run("--only", "triton_gelu", "--out", str(out))
    record = json.loads(out.read_text())
    names = {r["name"]: r for r in record["cases"]}
    assert set(names) == {"triton_gelu_slow", "triton_gelu_fast", "triton_gelu_autotuned"}
    assert all(r["correct"] for r in names.values())  # numerics in the interpreter
    assert "fp64_arithmetic" in {f["code"] for f in names["triton_gelu_slow"]["findings"]}
    assert record["command"].startswith("python benchmarks/study.py --only triton_gelu")
