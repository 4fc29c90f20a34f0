"""Score the gate against benchmarks/truth.py's independent labels, in-sample and out-of-sample apart.

Two modes.

``screen``: screen every entry of the corpus files with the gate (``kernelgate.many.screen_many``)
on this machine's device and write the gate's verdicts, one row per entry. Device command (H200,
repository root, the device bundle and the installed kernelgate on ``PYTHONPATH`` as in
benchmarks/README.md; the 60 entries, about 4 minutes)::

    python benchmarks/score_truth.py screen --corpus benchmarks/corpus_existing.json \\
        examples/corpus_oos/manifest.json --concurrency 8 --deadline-s 240 \\
        --out $OUT/gate_corpus_h200.json

On a GPU each entry is screened at its timed shape (benchmarks/corpus_existing.json: the problem's
own default shape, as benchmarks/study.py does; examples/corpus_oos/manifest.json: the
``gate_problem`` shape). Without one, at its small CPU shape: the entry's ``cpu_shape``, else
(the out-of-sample manifest has none) the ``small`` shape of its problem in truth.py's
``PROBLEMS``, the shape ``truth.py --check-only`` uses; nothing is timed (``untimed``). CPU
example (the Triton interpreter, under a minute on 2 cores)::

    .venv/bin/python benchmarks/score_truth.py screen --corpus benchmarks/corpus_existing.json \\
        examples/corpus_oos/manifest.json --only triton_rowsum_good oos_triton_gelu_block1024 \\
        --out /tmp/gate_corpus_cpu.json

The JSON is rewritten after each verdict, every entry in corpus order: a run cut short keeps what
finished, and an entry without a verdict yet reads ``not_run``. ``--deadline-s``: no screen starts
after that many seconds (the entries left are ``not_run``, "deadline passed"); the screens in
flight finish, for at most ``--grace-s`` more seconds, after which they are recorded ``not_run``
("no verdict by the hard stop") and the process exits. Per entry: name, corpus (``in_sample`` for
benchmarks/corpus_existing.json, ``out_of_sample`` for examples/corpus_oos/), status (accept,
repair, structural, reject, untimed; ``error`` for a fault of the gate, ``not_run``), reason, LRE
with its interval, U, the times, findings, seconds, message (the failure's message, else the
verdict's summary, else the gate's error); once: ``benchmarks/_record.py``'s run header, the
policy, the concurrency and the deadline.

``score``: read a truth JSON (truth.py's output) and a gate JSON (``screen``'s output), and write
the scoring record and a markdown table. The command, run on the CPU machine once both H200 JSONs
are in benchmarks/results/::

    .venv/bin/python benchmarks/score_truth.py score --truth benchmarks/results/truth_h200.json \\
        --gate benchmarks/results/gate_corpus_h200.json --out benchmarks/results/study_truth_h200.json \\
        --table docs/study_truth.md

AGREEMENT RULE (fixed on 2026-12-04, before any H200 result of truth.py or of this script)
-----------------------------------------------------------------------------------------
Derived from what the statuses mean (README "What a verdict means", ``kernelgate.models.Status``
and ``Reason``), not from results. The truth says whether a kernel is correct and, if so, whether
t_library / t_candidate >= 0.8 on its own timing. Each truth label asks one thing of the gate:

* truth ``incorrect``   -> the gate must not pass it: ``reject`` (any reason) agrees.
  ``accept``, ``repair``, ``structural`` disagree ("passed an incorrect kernel").
* truth ``inefficient`` -> the gate must neither accept it nor call it wrong: ``repair`` or
  ``structural`` agree (the truth cannot tell the two apart, so either counts), and so does a
  ``reject`` for an integrity reason (``INTEGRITY_REASONS``: the gate says the evaluation was
  gamed, a claim outside the truth's vocabulary, and no acceptance). ``accept`` disagrees
  ("accepted an inefficient kernel"); a ``reject`` for a correctness reason
  (``CORRECTNESS_REASONS``) disagrees ("rejected a correct kernel as wrong").
* truth ``efficient``   -> ``accept`` agrees. ``repair`` or ``structural`` disagree ("flagged an
  efficient kernel"); any ``reject`` disagrees ("rejected a correct, efficient kernel", naming
  whether the reason is a correctness or an integrity one).

Not counted, and listed as such: truth ``unstable``, ``error``, ``skipped``, ``not_run`` or no
truth row (the truth made no claim); gate ``untimed``, ``error``, ``not_run`` or no gate row (the
gate made no efficiency claim, or no verdict); a ``reject`` whose reason is in neither list. Two
per-axis tallies go beside the main one, over the entries where both sides speak to the axis:
correctness (truth correct, i.e. efficient/inefficient/unstable, or --check-only's ``correct``, or
incorrect, against the gate's accept/repair/structural/untimed, which say correct, or a reject for
a correctness reason; an integrity reject says nothing about the numbers) and efficiency (truth
efficient/inefficient against gate accept versus repair/structural). In-sample
(benchmarks/corpus_existing.json, the corpus the policy was chosen on) and out-of-sample
(examples/corpus_oos/, written after the policy was frozen) are counted apart, and every
disagreement is listed with the measurements of both sides. The policy is not changed to fit them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

RULE_DATE = "2026-12-04"
CORRECTNESS_REASONS = frozenset({
    "syntax_error", "load_error", "missing_entry", "compile_error", "runtime_error", "crash", "load_timeout",
    "run_timeout", "wrong_shape", "wrong_dtype", "wrong_output_type", "nonfinite_output", "numerics_mismatch",
    "trivial_output", "out_of_memory", "shape_specialized", "recheck_mismatch"})
"""Rejects that say the kernel computes wrong numbers, or does not run or finish."""
INTEGRITY_REASONS = frozenset({
    "no_kernel_launched", "unsynchronized_work", "exceeds_roofline", "tampering", "introspection",
    "library_op_used", "side_stream", "output_caching", "input_mutation", "host_work", "background_work",
    "forbidden_call", "timing_interference"})
"""Rejects that say the evaluation was gamed or a rule broken, not that the output is wrong."""
TRUTH_COUNTED = ("efficient", "inefficient", "incorrect")
GATE_COUNTED = ("accept", "repair", "structural", "reject")
CORPORA = ("in_sample", "out_of_sample")

RULE_TEXT = (
    "truth incorrect -> gate reject (any reason) agrees; accept/repair/structural disagree. "
    "truth inefficient -> repair or structural agree, reject for an integrity reason agrees; accept disagrees, "
    "reject for a correctness reason disagrees. truth efficient -> accept agrees; repair/structural/reject disagree. "
    "Not counted: truth unstable/error/skipped/not_run/missing, gate untimed/error/not_run/missing, a reject reason "
    f"in neither list. Correctness reasons: {sorted(CORRECTNESS_REASONS)}; integrity reasons: "
    f"{sorted(INTEGRITY_REASONS)}. Fixed {RULE_DATE}, before any H200 result.")


# --------------------------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------------------------

def corpus_of(corpus_file: str | None, kernel: str | None) -> str:
    """``out_of_sample`` for examples/corpus_oos/ (its manifest or its kernels), else ``in_sample``."""
    for path in (corpus_file, kernel):
        if path and "corpus_oos" in Path(path).as_posix():
            return "out_of_sample"
    return "in_sample"


def load_entries(paths: list[Path]) -> list[dict]:
    entries = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        items = data if isinstance(data, list) else data.get("entries", data.get("kernels"))
        if items is None:
            raise ValueError(f"{p}: no 'entries' list")
        for e in items:
            entries.append({**e, "corpus": corpus_of(str(p), e.get("kernel")), "corpus_file": str(p)})
    names = [e["name"] for e in entries]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"duplicate entry names: {', '.join(dup)}")
    return entries


_TRUTH_SMALL: dict | None = None


def truth_small_shape(problem: str) -> dict:
    """The small shape truth.py's --check-only uses for ``problem`` (its PROBLEMS table; truth.py
    imports nothing from kernelgate, and loading it runs no torch)."""
    global _TRUTH_SMALL
    if _TRUTH_SMALL is None:
        spec = importlib.util.spec_from_file_location("_truth_for_shapes", HERE / "truth.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["_truth_for_shapes"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        _TRUTH_SMALL = {name: dict(p.small) for name, p in module.PROBLEMS.items()}
    return dict(_TRUTH_SMALL[problem])


def gate_problem(entry: dict, gpu: bool):
    """The entry's problem as the gate names it, at the timed shape (GPU) or the small one (CPU)."""
    from kernelgate import Problem

    spec = entry["gate_problem"]
    if isinstance(spec, str):  # benchmarks/corpus_existing.json: a file, or "op NAME --dtype DTYPE"
        name, dtype, shape = spec, None, {}
        if spec.startswith("op "):
            words = spec.split()
            name = words[1]
            dtype = words[words.index("--dtype") + 1] if "--dtype" in words else "float32"
    else:  # examples/corpus_oos/manifest.json: {"problem", "dtype", "shape"}
        name, dtype, shape = spec["problem"], spec.get("dtype"), dict(spec.get("shape") or {})
    if not gpu:
        shape = dict(entry.get("cpu_shape") or truth_small_shape(entry["problem"]))
    if name.endswith(".py"):
        return Problem.file(str(ROOT / name), dtype=dtype, shape=shape)
    return Problem.op(name, dtype=dtype or "float32", **shape)


# --------------------------------------------------------------------------------------------
# screen
# --------------------------------------------------------------------------------------------

def _deadline_error():
    from kernelgate.errors import KernelgateError

    class DeadlinePassed(KernelgateError):
        """Raised by a lane asked to start a screen after the deadline (no retry: not a WorkerError)."""

    return DeadlinePassed


class DeadlineLane:
    """A ``kernelgate.many.Lane`` that refuses to start a screen once the deadline has passed."""

    def __init__(self, lane, deadline_at: float | None):
        self.lane, self.deadline_at = lane, deadline_at
        self.name = lane.name
        self.concurrency = getattr(lane, "concurrency", 1)
        self._error = _deadline_error()

    def start(self) -> None:
        self.lane.start()

    def run(self, job):
        if self.deadline_at is not None and time.monotonic() >= self.deadline_at:
            raise self._error("deadline passed before it was started")
        return self.lane.run(job)

    def close(self) -> None:
        self.lane.close()


def make_lanes(concurrency: int | None, deadline_at: float | None) -> list[DeadlineLane]:
    """One lane per visible GPU (``concurrency`` in flight on each), as ``screen_many`` makes them;
    without a GPU, half the cores' worth of one-at-a-time CPU lanes."""
    from kernelgate.many import Lane, visible_devices

    devices = visible_devices()
    if devices:
        lanes = [Lane(name=f"cuda:{d}", env={**os.environ, "CUDA_VISIBLE_DEVICES": d}, concurrency=concurrency or 1)
                 for d in devices]
    else:
        lanes = [Lane(name=f"cpu:{i}", env=None) for i in range(max(1, (os.cpu_count() or 2) // 2))]
    return [DeadlineLane(lane, deadline_at) for lane in lanes]


def _pending_row(entry: dict, why: str) -> dict:
    return {"name": entry["name"], "corpus": entry["corpus"], "kernel": entry["kernel"], "dsl": entry["dsl"],
            "truth_problem": entry.get("problem"), "status": "not_run", "reason": None, "lre": None,
            "lre_interval": None, "u": None, "u_library": None, "t_candidate_ms": None, "t_library_ms": None,
            "confidence": None, "findings": [], "seconds": None, "message": why}


def gate_row(entry: dict, result, problem) -> dict:
    row = _pending_row(entry, "")
    row["problem"] = problem.model_dump(mode="json") if problem is not None else None
    v = result.verdict
    if v is None:
        deadline = (result.error or "").startswith("DeadlinePassed")
        row.update(status="not_run" if deadline else "error",
                   message=("deadline passed before it was started" if deadline else result.error),
                   seconds=result.seconds)
        return row
    m = v.metrics
    row.update(status=v.status.value, reason=v.reason.value if v.reason else None, confidence=v.confidence,
               findings=list(dict.fromkeys(f.code for f in v.findings)), seconds=result.seconds,
               stage_seconds=result.stage_seconds, lane=result.lane, attempts=result.attempts,
               message=(v.failure.message[:600] if v.failure else v.summary))
    if m is not None:
        row.update(lre=m.lre, lre_interval=[m.lre_low, m.lre_high], u=m.u_candidate, u_library=m.u_library,
                   t_candidate_ms=m.t_candidate_ms, t_library_ms=m.t_library_ms, bound=m.bound)
    return row


def _write_json(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, allow_nan=False) + "\n")
    os.replace(tmp, path)


def _kill_own_children() -> None:
    """SIGKILL this process's own child processes (the gate's workers), found by their parent id."""
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def cmd_screen(args, argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    from _record import run_header

    from kernelgate import Candidate, ScreenOptions
    from kernelgate.hardware import detect
    from kernelgate.many import screen_many, summarize
    from kernelgate.policy import DEFAULT_POLICY

    entries = load_entries(args.corpus)
    if args.only:
        entries = [e for e in entries if any(w in e["name"] for w in args.only)]
    if not entries:
        print("score_truth.py screen: no entry selected", file=sys.stderr)
        return 2
    gpu = detect() is not None
    header = run_header("python benchmarks/score_truth.py", argv)
    rows = {e["name"]: _pending_row(e, "no verdict yet when this record was written") for e in entries}
    items, problems = [], {}
    for e in entries:
        try:
            problems[e["name"]] = gate_problem(e, gpu)
        except Exception as exc:  # the record says which entry, and why
            problems[e["name"]] = None
            rows[e["name"]].update(status="error", message=f"problem: {type(exc).__name__}: {exc}")
    # slow compilers first, so that their compiles overlap the other entries' screens
    todo = sorted((e for e in entries if problems[e["name"]] is not None),
                  key=lambda e: {"cuda": 0, "tilelang": 1}.get(e["dsl"], 2))
    for e in todo:
        items.append((Candidate(source=(ROOT / e["kernel"]).read_text(), name=e["name"],
                                entry=e.get("entry", "ModelNew")), problems[e["name"]]))
    started = time.monotonic()
    deadline_at = started + args.deadline_s if args.deadline_s else None
    hard_stop = deadline_at + args.grace_s if deadline_at is not None else None
    base = {**header, "mode": "gpu: timed shapes" if gpu else "no GPU: small CPU shapes, nothing timed",
            "corpora": [str(p) for p in args.corpus], "only": args.only,
            "concurrency": args.concurrency if gpu else None, "deadline_s": args.deadline_s, "grace_s": args.grace_s,
            "policy": DEFAULT_POLICY.model_dump(mode="json")}
    results = []

    def write(complete: bool) -> None:
        record = {**base, "elapsed_s": round(time.monotonic() - started, 1), "complete": complete,
                  "counts": _counts(rows.values()), "entries": [rows[e["name"]] for e in entries]}
        if results:
            record["run"] = summarize(results)
        _write_json(args.out, record)

    write(False)
    print(f"{'GPU' if gpu else 'no GPU: small CPU shapes, nothing timed'}: screening {len(todo)} corpus entries"
          + (f", deadline {args.deadline_s:.0f} s" if args.deadline_s else ""), flush=True)
    done: queue.Queue = queue.Queue()

    def consume() -> None:
        try:
            for result in screen_many(items, options=ScreenOptions(stream_check=args.stream_check),
                                      lanes=make_lanes(args.concurrency if gpu else None, deadline_at)):
                done.put(result)
        except BaseException as exc:  # the main thread reports it
            done.put(exc)
        done.put(None)

    threading.Thread(target=consume, name="score-truth-screen", daemon=True).start()
    cut_short = False
    while True:
        timeout = None if hard_stop is None else max(0.0, hard_stop - time.monotonic())
        try:
            result = done.get(timeout=timeout)
        except queue.Empty:
            cut_short = True
            break
        if result is None:
            break
        if isinstance(result, BaseException):
            print(f"screen_many failed: {type(result).__name__}: {result}", file=sys.stderr)
            cut_short = True
            break
        results.append(result)
        e = todo[result.index]
        rows[e["name"]] = gate_row(e, result, problems[e["name"]])
        r = rows[e["name"]]
        write(False)
        lre = f" LRE {r['lre']:.3f}" if r["lre"] is not None else ""
        print(f"  {e['name']:<44} {r['status']:<10} {(r['reason'] or ''):<18} {result.seconds:6.1f} s{lre}",
              flush=True)
    if cut_short:
        for r in rows.values():
            if r["status"] == "not_run" and r["message"].startswith("no verdict yet"):
                r["message"] = "no verdict by the hard stop (in flight, or queued behind one)"
    write(True)
    print(json.dumps(_counts(rows.values())), flush=True)
    print(f"wrote {args.out}", flush=True)
    if cut_short:  # screens still in flight: do not wait for them
        sys.stdout.flush()
        sys.stderr.flush()
        _kill_own_children()
        os._exit(0)
    return 0


def _counts(rows) -> dict:
    out: dict = {}
    for r in rows:
        c = out.setdefault(r["corpus"], {})
        c[r["status"]] = c.get(r["status"], 0) + 1
    return out


# --------------------------------------------------------------------------------------------
# score
# --------------------------------------------------------------------------------------------

def gate_class(status: str | None, reason: str | None) -> str:
    """accept, flagged (repair/structural), reject_correctness, reject_integrity, reject_unclassified,
    or the status itself for the ones not counted (untimed, error, not_run, missing)."""
    if status in ("repair", "structural"):
        return "flagged"
    if status == "reject":
        if reason in CORRECTNESS_REASONS:
            return "reject_correctness"
        if reason in INTEGRITY_REASONS:
            return "reject_integrity"
        return "reject_unclassified"
    return status or "missing"


AGREES = {
    "incorrect": {"reject_correctness", "reject_integrity", "reject_unclassified"},
    "inefficient": {"flagged", "reject_integrity"},
    "efficient": {"accept"},
}
EXPECTED = {"incorrect": "reject", "inefficient": "repair or structural (or an integrity reject)",
            "efficient": "accept"}
DISAGREEMENT_KIND = {
    ("incorrect", "accept"): "passed an incorrect kernel",
    ("incorrect", "flagged"): "passed an incorrect kernel",
    ("inefficient", "accept"): "accepted an inefficient kernel",
    ("inefficient", "reject_correctness"): "rejected a correct kernel as wrong",
    ("efficient", "flagged"): "flagged an efficient kernel",
    ("efficient", "reject_correctness"): "rejected a correct, efficient kernel as wrong",
    ("efficient", "reject_integrity"): "rejected a correct, efficient kernel for an integrity reason",
}


def judge(truth_label: str | None, status: str | None, reason: str | None) -> tuple[str, str | None]:
    """(outcome, why): outcome ``agree``, ``disagree`` or ``not_counted``; why names the
    disagreement, or why the entry is not counted."""
    cls = gate_class(status, reason)
    if truth_label not in TRUTH_COUNTED:
        return "not_counted", f"truth: {truth_label or 'no row'}"
    if cls in ("untimed", "error", "not_run", "missing"):
        return "not_counted", f"gate: {status or 'no row'}"
    if cls == "reject_unclassified" and truth_label != "incorrect":
        return "not_counted", f"gate: reject reason {reason!r} is in neither list of the rule"
    if cls in AGREES[truth_label]:
        return "agree", None
    return "disagree", DISAGREEMENT_KIND[(truth_label, cls)]


def _axis_correctness(truth_label: str | None, cls: str) -> str | None:
    """agree/disagree on correctness alone, or None where one side says nothing about it."""
    if truth_label in ("efficient", "inefficient", "unstable", "correct"):  # correct: truth.py --check-only
        truth_correct = True
    elif truth_label == "incorrect":
        truth_correct = False
    else:
        return None
    if cls in ("accept", "flagged", "untimed"):  # an integrity reject makes no claim about the numbers
        gate_correct = True
    elif cls == "reject_correctness":
        gate_correct = False
    else:
        return None
    return "agree" if truth_correct == gate_correct else "disagree"


def _axis_efficiency(truth_label: str | None, cls: str) -> str | None:
    if truth_label not in ("efficient", "inefficient") or cls not in ("accept", "flagged"):
        return None
    return "agree" if (truth_label == "efficient") == (cls == "accept") else "disagree"


def score(truth: dict, gate: dict) -> dict:
    """The scoring record: per entry both sides and the outcome; counts per corpus; the disagreements."""
    truth_rows = {r["name"]: r for r in truth.get("entries", [])}
    gate_rows = {r["name"]: r for r in gate.get("entries", [])}
    names = list(gate_rows) + [n for n in truth_rows if n not in gate_rows]
    entries = []
    for name in names:
        t, g = truth_rows.get(name), gate_rows.get(name)
        corpus = g["corpus"] if g else corpus_of(None, t.get("kernel"))
        label = t.get("label") if t else None
        status, reason = (g.get("status"), g.get("reason")) if g else (None, None)
        outcome, why = judge(label, status, reason)
        cls = gate_class(status, reason)
        entries.append({
            "name": name, "corpus": corpus, "dsl": (g or t).get("dsl"), "kernel": (g or t).get("kernel"),
            "truth": None if t is None else {
                "label": label, "correct": t.get("correct"), "ratio": t.get("ratio"),
                "t_library_ms": t.get("t_library_ms"), "t_candidate_ms": t.get("t_candidate_ms"),
                "intent": t.get("intent"), "error": t.get("error") or t.get("why")},
            "gate": None if g is None else {
                "status": status, "reason": reason, "class": cls, "lre": g.get("lre"),
                "lre_interval": g.get("lre_interval"), "u": g.get("u"), "t_candidate_ms": g.get("t_candidate_ms"),
                "t_library_ms": g.get("t_library_ms"), "findings": g.get("findings") or [],
                "confidence": g.get("confidence"), "message": g.get("message")},
            "expected": EXPECTED.get(label), "outcome": outcome, "why": why,
            "axis_correctness": _axis_correctness(label, cls), "axis_efficiency": _axis_efficiency(label, cls),
        })
    summary = {}
    for corpus in CORPORA:
        rows = [e for e in entries if e["corpus"] == corpus]
        confusion: dict = {}
        for e in rows:
            key = (e["truth"] or {}).get("label") or "no row"
            gkey = e["gate"]["class"] if e["gate"] else "no row"
            confusion.setdefault(key, {})
            confusion[key][gkey] = confusion[key].get(gkey, 0) + 1
        summary[corpus] = {
            "entries": len(rows),
            "counted": sum(e["outcome"] != "not_counted" for e in rows),
            "agree": sum(e["outcome"] == "agree" for e in rows),
            "disagree": sum(e["outcome"] == "disagree" for e in rows),
            "not_counted": sum(e["outcome"] == "not_counted" for e in rows),
            "correctness_axis": {k: sum(e["axis_correctness"] == k for e in rows) for k in ("agree", "disagree")},
            "efficiency_axis": {k: sum(e["axis_efficiency"] == k for e in rows) for k in ("agree", "disagree")},
            "truth_label_by_gate_class": confusion,
        }
    return {
        "rule": RULE_TEXT, "correctness_reasons": sorted(CORRECTNESS_REASONS),
        "integrity_reasons": sorted(INTEGRITY_REASONS),
        "summary": summary,
        "disagreements": [_case(e) for e in entries if e["outcome"] == "disagree"],
        "not_counted": [{"name": e["name"], "corpus": e["corpus"], "why": e["why"]}
                        for e in entries if e["outcome"] == "not_counted"],
        "entries": entries,
    }


def _case(e: dict) -> dict:
    return {"name": e["name"], "corpus": e["corpus"], "kind": e["why"], "truth": e["truth"], "gate": e["gate"]}


def _f(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _gate_text(g: dict | None) -> str:
    if g is None:
        return "no row"
    return g["status"] + (f" ({g['reason']})" if g.get("reason") else "")


def _truth_text(t: dict | None) -> str:
    return "no row" if t is None else str(t.get("label"))


def markdown(record: dict, truth_meta: dict, gate_meta: dict) -> str:
    s = record["summary"]
    lines = ["# The gate against the independent labels", "",
             f"Written by `python benchmarks/score_truth.py score` from the truth record "
             f"(`benchmarks/truth.py`: {truth_meta.get('device', {}).get('name', '?')}, "
             f"{truth_meta.get('date', '?')}, commit {truth_meta.get('git_commit') or '?'}) and the gate record "
             f"(`benchmarks/score_truth.py screen`: {(gate_meta.get('device') or {}).get('name', '?')}, "
             f"{gate_meta.get('date', '?')}, commit {gate_meta.get('commit') or '?'}). The agreement rule (the "
             "docstring of `benchmarks/score_truth.py` gives its reasons):", "",
             f"> {record['rule']}", "",
             "The truth labels a kernel correct against a float64 reference on three input distributions and "
             "efficient when t_library / t_candidate >= 0.8 on its own timing (`benchmarks/truth.py`). "
             "In-sample: `benchmarks/corpus_existing.json`, the study corpus the policy was chosen on. "
             "Out-of-sample: `examples/corpus_oos/`, written after the policy was frozen.", "",
             "## Agreement", "",
             "| corpus | entries | counted | agree | disagree | not counted | correctness axis agree/disagree | "
             "efficiency axis agree/disagree |", "|" + " --- |" * 8]
    for corpus in CORPORA:
        c = s[corpus]
        lines.append(f"| {corpus.replace('_', '-')} | {c['entries']} | {c['counted']} | {c['agree']} | "
                     f"{c['disagree']} | {c['not_counted']} | {c['correctness_axis']['agree']}/"
                     f"{c['correctness_axis']['disagree']} | {c['efficiency_axis']['agree']}/"
                     f"{c['efficiency_axis']['disagree']} |")
    for corpus in CORPORA:
        rows = [e for e in record["entries"] if e["corpus"] == corpus]
        lines += ["", f"## {'In-sample' if corpus == 'in_sample' else 'Out-of-sample'} entries", "",
                  "| kernel | truth | t_lib/t_cand (truth) | t_cand ms (truth) | gate | LRE | U | t_cand ms (gate) | "
                  "findings | outcome |", "|" + " --- |" * 10]
        for e in rows:
            t, g = e["truth"] or {}, e["gate"] or {}
            outcome = e["outcome"] + (f": {e['why']}" if e["why"] else "")
            lines.append(f"| {e['name']} | {_truth_text(e['truth'])} | {_f(t.get('ratio'))} | "
                         f"{_f(t.get('t_candidate_ms'), 4)} | {_gate_text(e['gate'])} | {_f(g.get('lre'))} | "
                         f"{_f(g.get('u'))} | {_f(g.get('t_candidate_ms'), 4)} | {', '.join(g.get('findings') or []) or '-'} | "
                         f"{outcome} |")
    lines += ["", "## Disagreements, case by case", ""]
    if not record["disagreements"]:
        lines.append("None.")
    for d in record["disagreements"]:
        t, g = d["truth"] or {}, d["gate"] or {}
        interval = g.get("lre_interval") or [None, None]
        lines.append(
            f"- **{d['name']}** ({d['corpus'].replace('_', '-')}): {d['kind']}. Truth: {t.get('label')}, "
            f"t_lib/t_cand {_f(t.get('ratio'))} (t_lib {_f(t.get('t_library_ms'), 4)} ms, t_cand "
            f"{_f(t.get('t_candidate_ms'), 4)} ms). Gate: {_gate_text(d['gate'])}, LRE {_f(g.get('lre'))} "
            f"[{_f(interval[0])}, {_f(interval[1])}], U {_f(g.get('u'))}, t_cand {_f(g.get('t_candidate_ms'), 4)} ms, "
            f"t_lib {_f(g.get('t_library_ms'), 4)} ms, findings {', '.join(g.get('findings') or []) or 'none'}; "
            f"{(g.get('message') or '').strip()[:300]}")
    lines += ["", "## Not counted", ""]
    if not record["not_counted"]:
        lines.append("None.")
    for n in record["not_counted"]:
        lines.append(f"- {n['name']} ({n['corpus'].replace('_', '-')}): {n['why']}")
    return "\n".join(lines) + "\n"


def cmd_score(args, argv: list[str]) -> int:
    truth = json.loads(args.truth.read_text())
    gate = json.loads(args.gate.read_text())
    record = score(truth, gate)
    out = {"command": " ".join(["python benchmarks/score_truth.py", *argv]),
           "truth_file": str(args.truth), "gate_file": str(args.gate),
           "truth_meta": {k: truth.get("meta", {}).get(k) for k in ("command", "date", "device", "git_commit",
                                                                      "versions", "mode", "rule")},
           "gate_meta": {k: gate.get(k) for k in ("command", "commit", "date", "device", "versions", "mode",
                                                   "concurrency", "deadline_s", "policy", "complete")},
           **record}
    _write_json(args.out, out)
    if args.table:
        args.table.parent.mkdir(parents=True, exist_ok=True)
        args.table.write_text(markdown(record, out["truth_meta"], out["gate_meta"]))
    print(json.dumps(record["summary"], indent=1))
    for d in record["disagreements"]:
        print(f"disagree: {d['name']} ({d['corpus']}): {d['kind']}")
    print(f"wrote {args.out}" + (f" and {args.table}" if args.table else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("screen", help="screen the corpus entries with the gate; write its verdicts")
    s.add_argument("--corpus", nargs="+", type=Path, required=True, help="corpus JSON file(s)")
    s.add_argument("--out", type=Path, required=True, help="the gate's verdicts (rewritten after each one)")
    s.add_argument("--only", nargs="+", metavar="WORD", help="entries whose name contains one of these")
    s.add_argument("--concurrency", type=int, default=None, help="candidates in flight per GPU (default 1; no effect without a GPU)")
    s.add_argument("--stream-check", action="store_true", help="the judge-clocked stream on (ScreenOptions.stream_check; off by default)")
    s.add_argument("--deadline-s", type=float, default=None, help="start no screen after this many seconds")
    s.add_argument("--grace-s", type=float, default=90.0,
                   help="after the deadline, wait this long for the screens in flight, then record them not_run")
    c = sub.add_parser("score", help="score the gate's verdicts against truth.py's labels")
    c.add_argument("--truth", type=Path, required=True, help="truth.py's JSON")
    c.add_argument("--gate", type=Path, required=True, help="the screen mode's JSON")
    c.add_argument("--out", type=Path, required=True, help="the scoring record (JSON)")
    c.add_argument("--table", type=Path, help="also write the markdown here")
    args = parser.parse_args(argv)
    return cmd_screen(args, argv) if args.mode == "screen" else cmd_score(args, argv)


if __name__ == "__main__":
    sys.exit(main())
