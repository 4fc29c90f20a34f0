"""benchmarks/score_truth.py, run as a script (nothing imported from benchmarks/): ``score`` on
hand-written truth and gate records (the agreement rule, the counts per corpus, the disagreements
case by case, what is not counted), and ``screen`` on the CPU (Triton's interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import HAS_GPU, ROOT

SCRIPT = ROOT / "benchmarks" / "score_truth.py"


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def _truth(name: str, label: str, ratio: float | None = None, kernel: str = "examples/triton/x.py") -> dict:
    t_cand = None if ratio is None else 1.0
    return {"name": name, "kernel": kernel, "dsl": "triton", "label": label, "correct": label != "incorrect",
            "ratio": ratio, "t_library_ms": ratio, "t_candidate_ms": t_cand}


def _gate(name: str, corpus: str, status: str, reason: str | None = None, lre: float | None = None) -> dict:
    return {"name": name, "corpus": corpus, "kernel": f"{name}.py", "dsl": "triton", "status": status,
            "reason": reason, "lre": lre, "lre_interval": None if lre is None else [lre * 0.9, lre * 1.1],
            "u": None if lre is None else lre / 2, "t_candidate_ms": None if lre is None else 1.0,
            "t_library_ms": lre, "findings": ["uncoalesced"] if status == "repair" else [],
            "confidence": 0.9, "seconds": 3.0, "message": f"{name} summary"}


# (name, corpus, truth label, ratio, gate status, gate reason, expected outcome)
CASES = [
    ("i_eff_acc", "in_sample", "efficient", 1.1, "accept", None, "agree"),
    ("i_ineff_rep", "in_sample", "inefficient", 0.3, "repair", None, "agree"),
    ("i_ineff_struct", "in_sample", "inefficient", 0.6, "structural", None, "agree"),
    ("i_wrong_rej", "in_sample", "incorrect", None, "reject", "numerics_mismatch", "agree"),
    ("i_eff_flagged", "in_sample", "efficient", 0.95, "repair", None, "disagree"),
    ("i_ineff_acc", "in_sample", "inefficient", 0.7, "accept", None, "disagree"),
    ("i_unstable", "in_sample", "unstable", None, "accept", None, "not_counted"),
    ("i_not_run", "in_sample", "efficient", 1.0, "not_run", None, "not_counted"),
    ("o_wrong_acc", "out_of_sample", "incorrect", None, "accept", None, "disagree"),
    ("o_ineff_host", "out_of_sample", "inefficient", 0.1, "reject", "host_work", "agree"),
    ("o_eff_side", "out_of_sample", "efficient", 1.2, "reject", "side_stream", "disagree"),
    ("o_ineff_wrong", "out_of_sample", "inefficient", 0.5, "reject", "numerics_mismatch", "disagree"),
    ("o_truth_err", "out_of_sample", "error", None, "reject", "crash", "not_counted"),
    ("o_untimed", "out_of_sample", "efficient", 1.0, "untimed", None, "not_counted"),
    ("o_unknown_reason", "out_of_sample", "efficient", 1.0, "reject", "some_new_reason", "not_counted"),
    ("o_wrong_integrity", "out_of_sample", "incorrect", None, "reject", "library_op_used", "agree"),
]


def test_score_counts_and_lists_disagreements(tmp_path):
    truth = {"meta": {"date": "2026-12-05", "device": {"name": "NVIDIA H200"}, "git_commit": "abc"},
             "entries": [_truth(n, lab, r) for n, _, lab, r, *_ in CASES]}
    # a truth row with no gate row (an out-of-sample kernel): listed, not counted
    truth["entries"].append(_truth("o_truth_only", "efficient", 1.0, kernel="examples/corpus_oos/triton/y.py"))
    gate = {"command": "python benchmarks/score_truth.py screen ...", "device": {"name": "NVIDIA H200"},
            "entries": [_gate(n, c, s, reason, lre=r) for n, c, _, r, s, reason, _ in CASES]}
    # a gate row with no truth row: listed, not counted
    gate["entries"].append(_gate("i_gate_only", "in_sample", "accept", lre=1.0))
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    (tmp_path / "gate.json").write_text(json.dumps(gate))
    out, table = tmp_path / "score.json", tmp_path / "study_truth.md"
    proc = _run(["score", "--truth", str(tmp_path / "truth.json"), "--gate", str(tmp_path / "gate.json"),
                 "--out", str(out), "--table", str(table)])
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text())
    outcomes = {e["name"]: e["outcome"] for e in record["entries"]}
    assert outcomes == {**{n: o for n, *_, o in CASES}, "o_truth_only": "not_counted", "i_gate_only": "not_counted"}
    s = record["summary"]
    assert {k: s["in_sample"][k] for k in ("entries", "counted", "agree", "disagree", "not_counted")} == \
        {"entries": 9, "counted": 6, "agree": 4, "disagree": 2, "not_counted": 3}
    assert {k: s["out_of_sample"][k] for k in ("entries", "counted", "agree", "disagree", "not_counted")} == \
        {"entries": 9, "counted": 5, "agree": 2, "disagree": 3, "not_counted": 4}
    # correctness axis: truth correct/incorrect against a status that says correct or a correctness reject
    # (o_untimed agrees; o_wrong_acc and o_ineff_wrong disagree; integrity rejects make no claim)
    assert s["out_of_sample"]["correctness_axis"] == {"agree": 1, "disagree": 2}
    assert s["in_sample"]["efficiency_axis"] == {"agree": 3, "disagree": 2}
    kinds = {d["name"]: (d["corpus"], d["kind"]) for d in record["disagreements"]}
    assert kinds == {
        "i_eff_flagged": ("in_sample", "flagged an efficient kernel"),
        "i_ineff_acc": ("in_sample", "accepted an inefficient kernel"),
        "o_wrong_acc": ("out_of_sample", "passed an incorrect kernel"),
        "o_eff_side": ("out_of_sample", "rejected a correct, efficient kernel for an integrity reason"),
        "o_ineff_wrong": ("out_of_sample", "rejected a correct kernel as wrong"),
    }
    flagged = next(d for d in record["disagreements"] if d["name"] == "i_eff_flagged")
    assert flagged["truth"]["ratio"] == 0.95 and flagged["gate"]["lre"] == 0.95
    assert flagged["gate"]["findings"] == ["uncoalesced"]
    why = {n["name"]: n["why"] for n in record["not_counted"]}
    assert why["i_unstable"] == "truth: unstable" and why["i_not_run"] == "gate: not_run"
    assert why["o_truth_only"] == "gate: no row" and why["i_gate_only"] == "truth: no row"
    assert "neither list" in why["o_unknown_reason"]
    assert "Fixed 2026-12-04" in record["rule"]
    md = table.read_text()
    assert "## Disagreements, case by case" in md and "## Out-of-sample entries" in md
    for name in kinds:
        assert f"**{name}**" in md
    assert "| in-sample | 9 | 6 | 4 | 2 | 3 |" in md
    assert "| out-of-sample | 9 | 5 | 2 | 3 | 4 |" in md
    assert "disagree: o_wrong_acc (out_of_sample): passed an incorrect kernel" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(HAS_GPU, reason="the CPU path (small shapes, the interpreter); the GPU path runs on the device")
def test_screen_on_the_cpu_writes_the_verdicts(tmp_path):
    out = tmp_path / "gate.json"
    proc = _run(["screen", "--corpus", "benchmarks/corpus_existing.json", "examples/corpus_oos/manifest.json",
                 "--only", "oos_triton_gelu_block1024", "--out", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(out.read_text())
    for key in ("command", "commit", "date", "device", "versions", "policy"):
        assert key in record
    assert record["complete"] is True and record["mode"].startswith("no GPU")
    assert record["counts"] == {"out_of_sample": {"untimed": 1}}
    [row] = record["entries"]
    assert row["name"] == "oos_triton_gelu_block1024" and row["corpus"] == "out_of_sample"
    assert row["status"] == "untimed" and row["reason"] is None and row["lre"] is None and row["u"] is None
    assert row["seconds"] > 0 and row["message"]
    # the manifest has no cpu_shape: truth.py's small shape for the problem
    assert row["problem"]["shape"] == {"rows": 64, "cols": 512}


def test_screen_past_the_deadline_marks_the_rest_not_run(tmp_path):
    out = tmp_path / "gate.json"
    proc = _run(["screen", "--corpus", "benchmarks/corpus_existing.json", "examples/corpus_oos/manifest.json",
                 "--only", "gelu", "--deadline-s", "0.001", "--out", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(out.read_text())
    assert record["complete"] is True
    rows = {r["name"]: r for r in record["entries"]}
    assert list(rows)[:5] == ["triton_gelu_slow", "triton_gelu_fast", "triton_gelu_autotuned", "tilelang_gelu_slow",
                              "tilelang_gelu_fast"]  # corpus order, whatever order they were screened in
    assert [r["corpus"] for r in rows.values()] == ["in_sample"] * 5 + ["out_of_sample"] * 4
    for r in rows.values():
        assert r["status"] == "not_run" and r["message"] == "deadline passed before it was started", r
    assert rows["tilelang_gelu_slow"]["problem"]["shape"] == {"rows": 64, "cols": 1024}  # the entry's cpu_shape
