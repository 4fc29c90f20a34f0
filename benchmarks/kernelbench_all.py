"""Every KernelBench problem at its shipped shape: one honest candidate each, screened on the GPU.

Device command (H200; repo as cwd; carry [".device", ".kb"]; timeout_s 600):

    SITE=$(mktemp -d) && tar -C "$SITE" -xJf .device/site.tar.xz && export PYTHONPATH="$SITE:$PWD" && python3 -m pip install -q --no-deps --no-build-isolation --no-index --target "$SITE" . && PYTHONUNBUFFERED=1 python3 benchmarks/kernelbench_all.py --kernelbench .kb --levels 1 2 --concurrency 8 --adaptive --resume benchmarks/results/kernelbench_all_h200.json --out "$OUT/kernelbench_all_h200.json" --gate-deadline-s 400 --deadline-s 530 --kernelbench-eval --kb-timeout-s 60

Each call writes ``$OUT/kernelbench_all_h200.json`` after every problem, so a call stopped at its
limit still returns what it finished. Copy that file to ``benchmarks/results/kernelbench_all_h200.json``
here and run the same command again: ``--resume`` skips what is recorded (a missing file starts a
fresh record) and the next call goes on; once every problem has a gate record, a call spends its
time on KernelBench's own eval. Level 3 is behind ``--levels 1 2 3``. SIGUSR1 prints every
thread's stack to stderr (``timeout -s USR1 -k 10 T ...``: where a stalled run waits, then the kill).

``.kb`` is a KernelBench export, made here once (about 0.9 MB; ``/.kb/`` is in ``.git/info/exclude``):

    M=/work/.mirror/ScalingIntelligence+KernelBench/repo; mkdir -p .kb && \\
    git --git-dir=$M archive HEAD LICENSE KernelBench/level1 KernelBench/level2 KernelBench/level3 \\
        src/kernelbench scripts/eval_from_generations.py | tar -x -C .kb && git --git-dir=$M rev-parse HEAD > .kb/COMMIT

No KernelBench code is in this repository: the checkout's path is an argument.

Candidates (generated at run time into a temp dir, not kept): where this repository has a real
Triton kernel for a problem (``REAL_KERNELS``), that kernel. Otherwise a wrapper: the problem's own
source followed by ``class ModelNew(Model)`` whose ``forward`` calls the reference's ``forward``
and passes its output through one Triton copy kernel into a fresh tensor. Such a candidate is
correct by construction and does its work in the library, so ``reject`` (``library_op_used``) is
the expected verdict; ``out_of_memory`` or a fault of the gate is a finding about the gate.

Per problem the record holds the verdict's status and reason, seconds per stage, the GPU memory
fields the verdict carries (any ``peak``/``footprint`` figure in ``verdict.model_dump()``) over the
problem's footprint (inputs + parameters + output, sized on the meta device by
``kernelgate.adapters.kernelbench.problem_footprint``), and with ``--kernelbench-eval`` the result of
KernelBench's own ``eval_kernel_against_ref`` on the same candidate, run from the checkout in a
subprocess per candidate with a timeout, with the settings of its ``scripts/eval_from_generations.py``
(5 correctness trials, 100 perf trials, ``cuda_event`` timing, fp32; backend ``triton``).
With ``--gate-alone`` each of those candidates is also screened by itself (``kernelgate.screen``,
one spare worker started ahead) just before KernelBench's eval of it: seconds per candidate, both
one at a time, in the same run.
A gate fault on one problem is recorded with its text and the loop goes on.

CPU check of everything but the gate's measurements (the test suite runs it on three copied
problems): ``--fake-gate`` screens with ``kernelgate.testing.FakeRunner`` (no worker, no GPU;
every candidate a ``library_op_used`` reject), ``--fake-fault KEY`` makes
the worker fault on those problems, ``--fake-gate broken`` gives a lane that cannot start, and
``--keep-candidates DIR`` keeps the generated candidates.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

SCRIPT = "python3 benchmarks/kernelbench_all.py"
MEMORY_BUDGET_FACTOR = 3
"""Issue 19's budget (kernelgate.worker.stages.MEMORY_BUDGET_FACTOR, not imported: the record states its own rule)."""

REAL_KERNELS: dict[tuple[int, str], str] = {
    (1, "1_Square_matrix_multiplication_.py"): "examples/triton/matmul_good.py",
    (1, "19_ReLU.py"): "examples/kernelbench/runs/triton_demo/level_1_problem_3_sample_1_kernel.py",
    (1, "23_Softmax.py"): "examples/triton/softmax_good.py",
    (1, "26_GELU_.py"): "examples/triton/gelu_fast.py",
    (1, "40_LayerNorm.py"): "examples/triton/layernorm_split.py",
}
"""KernelBench (level, file) -> a Triton kernel of this repository written for that computation.
The row sums (``examples/triton/rowsum_*.py``) reduce the last dim; no level-1 or level-2 problem
does (L1-47 sums over dim 1 with keepdim), so they have no entry."""

KB_EVAL_SETTINGS = {"num_correct_trials": 5, "num_perf_trials": 100, "timing_method": "cuda_event",
                    "measure_performance": True, "precision": "fp32", "backend": "triton", "seed_num": 42}
"""KernelBench's ``scripts/eval_from_generations.py`` defaults (EvalConfig), backend triton for
these candidates."""

WRAPPER_TAIL = '''

# ---- candidate (kernelgate benchmarks/kernelbench_all.py): the reference above, then one Triton pass ----
import triton
import triton.language as tl


@triton.jit
def _kg_copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _kg_triton_copy(value):
    """A tensor copied by the Triton kernel into a fresh tensor; tuples and lists element-wise."""
    if isinstance(value, (tuple, list)):
        return type(value)(_kg_triton_copy(v) for v in value)
    if not isinstance(value, torch.Tensor):
        return value
    src = value.contiguous()
    dst = torch.empty_like(src)
    n = src.numel()
    if n:
        a, b = (src.view(torch.uint8), dst.view(torch.uint8)) if src.dtype == torch.bool else (src, dst)
        _kg_copy_kernel[(triton.cdiv(n, 4096),)](a, b, n, BLOCK=4096, num_warps=8)
    return dst


class ModelNew(Model):
    """The reference's computation, its output passed through one Triton copy."""

    def forward(self, *args, **kwargs):
        return _kg_triton_copy(super().forward(*args, **kwargs))
'''


# --- problems and candidates ----------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    level: int
    problem_id: int
    path: Path

    @property
    def key(self) -> str:
        return f"{self.level}/{self.problem_id}"


def discover(kernelbench: str | Path, levels: Iterable[int], only: Iterable[str] = ()) -> list[Entry]:
    """The problems of ``levels`` in a checkout, by level then id. ``only``: keys (``1/19``) or
    parts of file names (``ReLU``); any match selects."""
    from kernelgate.adapters.kernelbench import problem_files

    only = list(only)
    entries = []
    for level in levels:
        for problem_id, path in sorted(problem_files(kernelbench, level).items()):
            entry = Entry(level, problem_id, path.resolve())
            if only and not any(o == entry.key or o in path.name for o in only):
                continue
            entries.append(entry)
    return entries


def wrapper_source(problem_source: str) -> str:
    """A ``ModelNew`` candidate: the problem's own source, then a subclass of its ``Model`` whose
    output goes through one Triton copy kernel."""
    return problem_source.rstrip() + "\n" + WRAPPER_TAIL


@dataclass(frozen=True)
class Generated:
    entry: Entry
    path: Path
    kind: str
    """``real_kernel`` or ``wrapper_triton_copy``."""
    origin: str | None
    """The repository file a real kernel came from."""
    sha256: str

    @property
    def source(self) -> str:
        return self.path.read_text()


def generate(entry: Entry, folder: Path) -> Generated:
    """Write the candidate for one problem into ``folder``."""
    origin = REAL_KERNELS.get((entry.level, entry.path.name))
    if origin is not None:
        source, kind = (ROOT / origin).read_text(), "real_kernel"
    else:
        source, kind = wrapper_source(entry.path.read_text()), "wrapper_triton_copy"
    path = folder / f"level{entry.level}_{entry.path.stem}_candidate.py"
    path.write_text(source)
    return Generated(entry, path, kind, origin, hashlib.sha256(source.encode()).hexdigest())


def footprint_record(path: Path) -> dict[str, Any]:
    """The problem's footprint on the meta device (nothing allocated), or why it could not be sized."""
    from kernelgate.adapters.kernelbench import problem_footprint

    try:
        fp = problem_footprint(path)
    except Exception as exc:  # noqa: BLE001 -- the record says so; the gate still screens the problem
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"shape": fp.shape, "inputs": [t.model_dump() for t in fp.inputs], "input_bytes": fp.input_bytes,
            "parameter_bytes": fp.parameter_bytes, "output_bytes": fp.output_bytes, "total_bytes": fp.total_bytes,
            "error": fp.error}


# --- what the verdict says ------------------------------------------------------------------


def memory_fields(dump: Any, path: str = "") -> dict[str, float]:
    """Numeric leaves of a verdict dump under a key naming a peak or a footprint (``memory.judge_peak_bytes``),
    by dotted path. The hardware ceilings (``metrics.peaks``: FLOP/s, bandwidth) are not memory and are skipped."""
    found: dict[str, float] = {}
    if isinstance(dump, dict):
        for key, value in dump.items():
            sub = f"{path}.{key}" if path else str(key)
            if sub == "metrics.peaks":
                continue
            if isinstance(value, (dict, list)):
                found.update(memory_fields(value, sub))
            elif (isinstance(value, (int, float)) and not isinstance(value, bool)
                  and any(word in part.lower() for part in sub.split(".") for word in ("peak", "footprint"))):
                found[sub] = value
    elif isinstance(dump, list):
        for i, value in enumerate(dump):
            found.update(memory_fields(value, f"{path}[{i}]"))
    return found


def peak_ratios(fields: dict[str, float], footprint_bytes: int | None) -> dict[str, float]:
    """Each peak figure over the footprint: the verdict's own ``footprint_bytes`` where it has one,
    else the meta-device footprint. Only figures in bytes (paths with ``bytes``) are divided."""
    own = [v for k, v in fields.items() if k.endswith("footprint_bytes") and v > 0]
    base = own[0] if own else footprint_bytes
    if not base:
        return {}
    return {k: round(v / base, 3) for k, v in fields.items()
            if "peak" in k.lower() and "bytes" in k.lower() and "footprint" not in k.lower()}


def gate_record(result, generated: Generated, footprint: dict[str, Any]) -> dict[str, Any]:
    """One ``ScreenResult`` as plain data."""
    record: dict[str, Any] = {"error": result.error, "wall_seconds": result.seconds, "attempts": result.attempts,
                              "lane": result.lane, "candidate_sha256": generated.sha256}
    verdict = result.verdict
    if verdict is None:
        return {**record, "status": None, "reason": None}
    dump = verdict.model_dump(mode="json")
    fields = memory_fields(dump)
    n, m = verdict.numerics, verdict.metrics
    record.update(
        status=verdict.status.value, reason=verdict.reason.value if verdict.reason else None,
        summary=verdict.summary, failure=(verdict.failure.message[:600] if verdict.failure else None),
        failure_stage=verdict.failure.stage if verdict.failure else None,
        findings=[f.code for f in verdict.findings], seconds=dict(verdict.seconds),
        numerics={"checked": n.checked, "passed": n.passed, "executor": n.executor,
                  "max_normalized_error": max((t.normalized_error for t in n.trials if t.normalized_error is not None),
                                              default=None)} if n is not None else None,
        metrics={"t_candidate_ms": m.t_candidate_ms, "t_library_ms": m.t_library_ms, "lre": m.lre,
                 "u_candidate": m.u_candidate, "u_library": m.u_library} if m is not None else None,
        memory=fields or None, peak_over_footprint=peak_ratios(fields, footprint.get("total_bytes")) or None,
        gate_over_footprint=(round(verdict.memory.gate_over_footprint(), 3)
                             if verdict.memory is not None and verdict.memory.gate_over_footprint() is not None else None),
        notes=[note[:300] for note in verdict.notes][:8])
    return record


# --- the record: written after every problem, read back to resume ---------------------------


def load_record(path: Path | None) -> dict[str, Any]:
    """An earlier record to resume from; a fresh one when there is none."""
    if path is not None and path.is_file():
        record = json.loads(path.read_text())
        record.setdefault("runs", [])
        record.setdefault("problems", {})
        return record
    return {"runs": [], "problems": {}}


def write_record(record: dict[str, Any], path: Path) -> None:
    """Write atomically (a file in the same folder, then renamed): a kill never leaves half a JSON."""
    record["summary"] = summarize(record)
    record["problems"] = dict(sorted(record["problems"].items(), key=lambda kv: tuple(map(int, kv[0].split("/")))))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)


def plan(entries: list[Entry], record: dict[str, Any], *, kb_eval: bool, retry_errors: bool = False,
         limit: int | None = None, shas: dict[str, str] | None = None,
         rescreen: Iterable[str] = ()) -> tuple[list[Entry], list[Entry]]:
    """What is left: (problems for the gate, problems for KernelBench's eval).

    A problem is done for the gate once it has a verdict, or an error unless ``retry_errors``.
    KernelBench's eval is due for problems that have a gate record and no eval result yet (a
    timeout counts as a result; an exception or a missing result does not under ``retry_errors``). A record made for another candidate (``shas``: key -> the
    sha256 of this call's candidate) does not count. ``limit`` caps the gate's share of this call.
    Problems keyed in ``rescreen`` (or all of them, for ``all``) go to the gate again whatever the
    record holds.
    """
    problems = record["problems"]
    shas = shas or {}

    def current(part: dict | None, key: str) -> dict | None:
        if part is not None and key in shas and part.get("candidate_sha256") != shas[key]:
            return None
        return part

    gate_todo, kb_todo = [], []
    for entry in entries:
        gate = current((problems.get(entry.key) or {}).get("gate"), entry.key)
        if gate is None or (gate.get("status") is None and retry_errors) or entry.key in rescreen or "all" in rescreen:
            gate_todo.append(entry)
        kb = current((problems.get(entry.key) or {}).get("kernelbench_eval"), entry.key)
        if kb_eval and (kb is None or (retry_errors and not kb.get("finished") and not kb.get("timed_out"))):
            kb_todo.append(entry)
    if limit is not None:
        gate_todo = gate_todo[:limit]
    screened = {e.key for e in gate_todo}
    kb_todo = [e for e in kb_todo
               if e.key in screened or current((problems.get(e.key) or {}).get("gate"), e.key) is not None]
    return gate_todo, kb_todo


KEEP_ALIVE_BYTES = 256 << 20
"""ScreenOptions.keep_alive_bytes's default (not imported): at or below it the judge keeps each call's
buffers alive, so that every call gets addresses no earlier one had."""


def over_budget_why(gate: dict[str, Any]) -> str:
    """What the record's own figures say of a problem over the memory budget."""
    memory = gate.get("memory") or {}
    footprint = memory.get("memory.footprint_bytes") or 0
    fp64 = memory.get("memory.reference_fp64_peak_bytes")
    why = []
    if footprint and footprint <= KEEP_ALIVE_BYTES:
        why.append(f"footprint {footprint / 2**20:.0f} MiB, at most keep_alive_bytes: buffers kept alive")
    if fp64 and footprint and fp64 > MEMORY_BUDGET_FACTOR * footprint:
        why.append(f"the fp64 reference's own call allocated {fp64 / footprint:.1f}x the footprint")
    return "; ".join(why) or "not explained by the record"


def summarize(record: dict[str, Any]) -> dict[str, Any]:
    problems = list(record["problems"].values())
    gates = [p["gate"] for p in problems if p.get("gate")]
    kbs = [p["kernelbench_eval"] for p in problems if p.get("kernelbench_eval")]
    stages: dict[str, list[float]] = {}
    for g in gates:
        for stage, secs in (g.get("seconds") or {}).items():
            stages.setdefault(stage, []).append(secs)
    ratios = [r for g in gates for r in (g.get("peak_over_footprint") or {}).values()]
    budget = {k: p["gate"]["gate_over_footprint"] for k, p in record["problems"].items()
              if p.get("gate") and p["gate"].get("gate_over_footprint") is not None}
    kb_done = [k for k in kbs if k.get("finished")]
    return {
        "problems": len(problems),
        "screened": len(gates),
        "by_status": dict(sorted(Counter(g["status"] or "gate_error" for g in gates).items())),
        "by_reason": dict(sorted(Counter(g["reason"] for g in gates if g.get("reason")).items())),
        "by_candidate": dict(sorted(Counter(p["candidate"]["kind"] for p in problems if p.get("candidate")).items())),
        "gate_errors": sorted(k for k, p in record["problems"].items() if p.get("gate") and p["gate"].get("error")),
        "out_of_memory": sorted(k for k, p in record["problems"].items()
                                if p.get("gate") and p["gate"].get("reason") == "out_of_memory"),
        "median_stage_seconds": {s: round(statistics.median(v), 3) for s, v in sorted(stages.items())},
        "median_gate_seconds": round(statistics.median(g["seconds"]["total"] for g in gates if g.get("seconds")), 3)
        if any(g.get("seconds") for g in gates) else None,
        "peak_over_footprint_max": max(ratios) if ratios else None,
        "peak_over_footprint_median": round(statistics.median(ratios), 3) if ratios else None,
        # the memory budget: the judge's peak beyond the reference's own needs and its fixed buffers
        # (the 256 MiB L2 flush buffer), over the footprint (MemoryReport.gate_over_footprint)
        "gate_over_footprint_max": max(budget.values()) if budget else None,
        "gate_over_footprint_median": round(statistics.median(budget.values()), 3) if budget else None,
        "over_memory_budget": {k: budget[k] for k in sorted(budget) if budget[k] > MEMORY_BUDGET_FACTOR},
        "over_memory_budget_why": {k: over_budget_why(record["problems"][k]["gate"])
                                   for k in sorted(budget) if budget[k] > MEMORY_BUDGET_FACTOR},
        "kernelbench_eval": {
            "run": len(kbs), "finished": len(kb_done), "did_not_finish": len(kbs) - len(kb_done),
            "compiled": sum(1 for k in kb_done if k.get("compiled")),
            "correct": sum(1 for k in kb_done if k.get("correctness")),
            "timed": sum(1 for k in kb_done if (k.get("runtime_ms") or -1) > 0),
            "median_seconds": round(statistics.median(k["seconds_wall"] for k in kbs), 2) if kbs else None,
        },
        "gate_alone": alone_summary(problems),
    }


def alone_summary(problems: list[dict[str, Any]]) -> dict[str, Any]:
    """``--gate-alone`` beside KernelBench's eval: the problems where both ran on the same candidate,
    their medians, and on how many the gate's verdict came first."""
    both = [(p["gate_alone"], p["kernelbench_eval"]) for p in problems
            if p.get("gate_alone") and p.get("kernelbench_eval")
            and p["gate_alone"].get("candidate_sha256") == p["kernelbench_eval"].get("candidate_sha256")]
    if not both:
        return {"both": 0}
    return {"both": len(both),
            "gate_median_seconds": round(statistics.median(g["seconds_wall"] for g, _ in both), 2),
            "kernelbench_median_seconds": round(statistics.median(k["seconds_wall"] for _, k in both), 2),
            "gate_faster": sum(1 for g, k in both if g["seconds_wall"] < k["seconds_wall"]),
            "gate_errors": sum(1 for g, _ in both if g.get("error"))}


# --- KernelBench's own eval, one subprocess per candidate -----------------------------------


def run_kb_eval(kernelbench: Path, reference: Path, candidate: Path, timeout_s: float, workdir: Path, *,
                settings: dict[str, Any] | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """KernelBench's ``eval_kernel_against_ref`` on one candidate, in a subprocess of its own
    (its own process group, killed at ``timeout_s``). ``command`` replaces the child (tests)."""
    workdir.mkdir(parents=True, exist_ok=True)
    result_path, log_path = workdir / "result.json", workdir / "log.txt"
    result_path.unlink(missing_ok=True)
    settings = {**KB_EVAL_SETTINGS, **(settings or {})}
    command = command or [sys.executable, str(Path(__file__).resolve()), "--kb-child", "--kernelbench",
                          str(kernelbench), "--kb-reference", str(reference), "--kb-candidate", str(candidate),
                          "--kb-result", str(result_path), "--kb-settings", json.dumps(settings)]
    began = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            returncode, timed_out = proc.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            returncode, timed_out = proc.wait(), True
    out: dict[str, Any] = {"seconds_wall": round(time.perf_counter() - began, 2), "timeout_s": timeout_s,
                           "returncode": returncode, "timed_out": timed_out}
    child = json.loads(result_path.read_text()) if result_path.is_file() else None
    if timed_out:
        out.update(finished=False, error=f"did not finish within {timeout_s:g} s")
    elif child is None:
        out.update(finished=False, error=f"no result (exit code {returncode})")
    else:
        out.update(child)
        out["finished"] = child.get("exception") is None and child.get("returned") is not None
    if not out["finished"] or out.get("exception"):
        out["log_tail"] = log_path.read_bytes()[-1200:].decode(errors="replace")
    return out


_KB_LLM_MODULES = ("dotenv", "openai", "litellm")


def _kb_placeholder(name: str):
    """A stand-in for one of KernelBench's LLM-client imports (``kernelbench/utils.py`` imports them at
    module level; eval never calls them): calling anything in it raises."""
    import types

    module = types.ModuleType(name)

    def unavailable(*_a, **_k):
        raise RuntimeError(f"{name} is not installed here; kernelgate's benchmark imported a placeholder")

    if name == "dotenv":
        module.load_dotenv = lambda *a, **k: False  # as python-dotenv returns when it finds no .env
    elif name == "openai":
        module.OpenAI = unavailable
    elif name == "litellm":
        module.completion = unavailable
    return module


def kb_child(args: argparse.Namespace) -> int:
    """Runs in the subprocess: import KernelBench from the checkout, evaluate, write the result JSON."""
    out: dict[str, Any] = {"placeholders": [], "exception": None, "returned": None}
    began = time.perf_counter()
    sys.path.insert(0, str(Path(args.kernelbench).resolve() / "src"))
    try:
        for _ in range(len(_KB_LLM_MODULES) + 1):
            try:
                from kernelbench import eval as kb_eval
                break
            except ModuleNotFoundError as exc:
                if exc.name not in _KB_LLM_MODULES or exc.name in out["placeholders"]:
                    raise
                for loaded in [m for m in sys.modules if m == "kernelbench" or m.startswith("kernelbench.")]:
                    del sys.modules[loaded]
                sys.modules[exc.name] = _kb_placeholder(exc.name)
                out["placeholders"].append(exc.name)
        import torch

        out["seconds_import"] = round(time.perf_counter() - began, 2)
        settings = json.loads(args.kb_settings)
        precision = kb_eval.get_torch_dtype_from_string(settings["precision"])
        device = torch.device("cuda", 0) if torch.cuda.is_available() else None
        t0 = time.perf_counter()
        res = kb_eval.eval_kernel_against_ref(
            Path(args.kb_reference).read_text(), Path(args.kb_candidate).read_text(),
            seed_num=settings["seed_num"], num_correct_trials=settings["num_correct_trials"],
            num_perf_trials=settings["num_perf_trials"], measure_performance=settings["measure_performance"],
            timing_method=settings["timing_method"], verbose=False,
            build_dir=str(Path(args.kb_result).parent / "build"), device=device, backend=settings["backend"],
            precision=precision)
        out["seconds_eval"] = round(time.perf_counter() - t0, 2)
        out["returned"] = "None (KernelBench: retry)" if res is None else "KernelExecResult"
        if res is not None:
            out.update(compiled=res.compiled, correctness=res.correctness, runtime_ms=res.runtime,
                       ref_runtime_ms=res.ref_runtime, runtime_stats=res.runtime_stats,
                       ref_runtime_stats=res.ref_runtime_stats,
                       metadata={k: (v if isinstance(v, (bool, int, float)) or v is None else str(v)[:600])
                                 for k, v in res.metadata.items()})
    except BaseException as exc:  # noqa: BLE001 -- the parent records it (SystemExit from KernelBench too)
        import traceback

        out["exception"] = f"{type(exc).__name__}: {exc}"[:600]
        out["traceback_tail"] = traceback.format_exc()[-1500:]
    Path(args.kb_result).write_text(json.dumps(out, default=str))
    return 0


# --- the run --------------------------------------------------------------------------------


def _git_commit() -> dict[str, Any]:
    if os.environ.get("KERNELGATE_COMMIT"):  # set by whoever ships the tree to a machine without .git
        return {"git_commit": os.environ["KERNELGATE_COMMIT"], "git_commit_from": "KERNELGATE_COMMIT"}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=False, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, check=False,
                               capture_output=True, text=True, timeout=10)
        if commit.returncode == 0:
            return {"git_commit": commit.stdout.strip(), "git_dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"git_commit": None}


def _source_digest() -> str:
    """sha256 over the code that ran (kernelgate, adapters, reference_ops, this script): on the device
    there is no .git, and this ties the record to a tree here (hash the same files to compare)."""
    h = hashlib.sha256()
    files = sorted(p for folder in ("kernelgate", "adapters", "reference_ops") for p in (ROOT / folder).rglob("*.py"))
    for p in files + [Path(__file__).resolve()]:
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def run_header(argv: list[str]) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from _record import run_header as header

    head = header(SCRIPT, argv)
    head.update(_git_commit())
    head["source_sha256"] = _source_digest()
    try:
        import torch

        if torch.cuda.is_available():  # beside NVML's in ``device``: this one needs no NVML
            head["device_uuid_torch"] = str(torch.cuda.get_device_properties(0).uuid)
    except Exception as exc:  # noqa: BLE001 -- the header says why instead of failing the run
        head["device_uuid_torch"] = f"unavailable: {type(exc).__name__}: {exc}"[:200]
    return head


def screen_gate(todo: list[Entry], generated: dict[str, Generated], record: dict[str, Any], out: Path, *,
                options, concurrency: int | None, deadline: float | None, run_index: int,
                screen_kwargs: dict[str, Any] | None = None, log=print) -> list[str]:
    """Screen ``todo`` with ``screen_many``, writing the record after each problem. Returns the keys
    screened. Nothing new starts after ``deadline`` (``time.monotonic()``); what was in flight is
    left for the next call. A fault of the whole loop is retried once on the rest, then recorded."""
    from kernelgate.many import screen_many
    from kernelgate.models import Problem

    done: list[str] = []
    pending = list(todo)
    faults = record["runs"][run_index].setdefault("gate_loop_faults", [])
    for attempt in (1, 2):
        if not pending or (deadline is not None and time.monotonic() > deadline):
            break
        items = [(candidate_for(e, generated[e.key]), Problem.file(str(e.path))) for e in pending]
        try:
            stream = screen_many(items, options=options, concurrency=concurrency, **(screen_kwargs or {}))
            try:
                for result in stream:
                    entry = pending[result.index]
                    problem = record["problems"][entry.key]
                    problem["gate"] = gate_record(result, generated[entry.key], problem.get("footprint") or {})
                    problem["gate"]["run"] = run_index
                    done.append(entry.key)
                    write_record(record, out)
                    g = problem["gate"]
                    log(f"[gate {len(done)}/{len(todo)}] {entry.key} {entry.path.name}: "
                        f"{g['status'] or 'ERROR'} {g['reason'] or g['error'] or ''} "
                        f"({(g.get('seconds') or {}).get('total', g['wall_seconds'])} s)")
                    if deadline is not None and time.monotonic() > deadline:
                        log("[gate] deadline reached: the rest is left for --resume")
                        break
            finally:
                stream.close()
        except Exception as exc:  # noqa: BLE001 -- the loop itself failed: every problem still gets a record
            faults.append(f"attempt {attempt}: {type(exc).__name__}: {exc}"[:800])
            log(f"[gate] loop fault: {faults[-1]}")
        pending = [e for e in pending if e.key not in done]
        if not faults or deadline is not None and time.monotonic() > deadline:
            break
    if faults and pending and (deadline is None or time.monotonic() <= deadline):
        for e in pending:
            record["problems"][e.key]["gate"] = {"status": None, "reason": None, "run": run_index,
                                                 "error": f"gate loop fault, twice: {faults[-1]}",
                                                 "candidate_sha256": generated[e.key].sha256}
            done.append(e.key)
        write_record(record, out)
    return done


def candidate_for(entry: Entry, generated: Generated):
    """The gate's ``Candidate`` for a problem's generated source."""
    from kernelgate.models import Candidate

    return Candidate(source=generated.source, dsl="triton", entry="ModelNew",
                     name=f"kb_level{entry.level}_{entry.path.stem}",
                     metadata={"kernelbench_level": entry.level, "kernelbench_problem": entry.problem_id,
                               "candidate_kind": generated.kind})


def _alone_pool():
    """``--gate-alone``'s runner: kernelgate's worker pool as ``screen`` uses it, one spare started ahead."""
    from kernelgate.worker import WorkerPool

    return WorkerPool(spares=1)


def screen_alone(entry: Entry, generated: Generated, runner, options, run_index: int) -> dict[str, Any]:
    """The candidate screened by itself with ``kernelgate.screen``: the seconds a caller waits for
    one verdict, to set beside KernelBench's eval of the same candidate (also one at a time)."""
    from kernelgate import screen
    from kernelgate.models import Problem

    began = time.monotonic()
    try:
        verdict = screen(candidate_for(entry, generated), Problem.file(str(entry.path)), options=options, runner=runner)
        said = {"status": verdict.status.value, "reason": verdict.reason.value if verdict.reason else None,
                "error": None}
    except Exception as exc:  # noqa: BLE001 -- recorded: a fault of the gate is a finding
        said = {"status": None, "reason": None, "error": f"{type(exc).__name__}: {exc}"[:600]}
    return {**said, "seconds_wall": round(time.monotonic() - began, 2), "run": run_index,
            "candidate_sha256": generated.sha256}


def fake_lane(mode: str, fault_names: Iterable[str]):
    """``--fake-gate``: a ``screen_many`` lane that runs nothing (``kernelgate.testing.FakeRunner``). Every
    candidate is a ``library_op_used`` reject; the candidates named in ``fault_names`` get a worker
    fault; ``broken``: it cannot start."""
    from kernelgate.models import Reason
    from kernelgate.testing import FakeRunner, fake_measurement

    return FakeRunner(fake_measurement(None, failure=Reason.library_op_used), fault_for=fault_names,
                      start_error=RuntimeError("lane cannot start") if mode == "broken" else None)


def main(argv: list[str] | None = None) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stalled run says where it waits
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True, help="a KernelBench checkout (or an export of it)")
    parser.add_argument("--out", help="the results JSON to write (after every problem)")
    parser.add_argument("--resume", nargs="?", const="", default=None, metavar="JSON",
                        help="skip what an earlier record holds (default: --out); a missing file starts afresh")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2], help="default 1 2; level 3 only if named")
    parser.add_argument("--only", nargs="+", default=[], help="keys (1/19) or parts of file names")
    parser.add_argument("--limit", type=int, help="screen at most this many new problems in this call")
    parser.add_argument("--concurrency", type=int, help="candidates in flight per GPU (default: kernelgate's)")
    parser.add_argument("--adaptive", action="store_true", help="ScreenOptions(timing_adaptive=True)")
    parser.add_argument("--retry-errors", action="store_true",
                        help="redo problems whose gate faulted, and KernelBench evals that raised or gave no result")
    parser.add_argument("--rescreen", nargs="+", default=[], metavar="KEY",
                        help="screen these problems (keys, 1/23; all: every one) again even if the record has a verdict")
    parser.add_argument("--gate-deadline-s", type=float, help="start no new screen after this many seconds")
    parser.add_argument("--deadline-s", type=float, help="start nothing new after this many seconds")
    parser.add_argument("--kernelbench-eval", action="store_true", help="also run KernelBench's eval_kernel_against_ref")
    parser.add_argument("--kb-timeout-s", type=float, default=60.0)
    parser.add_argument("--kb-limit", type=int, help="at most this many KernelBench evals in this call")
    parser.add_argument("--gate-alone", action="store_true",
                        help="with --kernelbench-eval: screen each candidate again, one at a time, just before "
                             "KernelBench's eval of it (seconds per candidate, both alone, same run)")
    parser.add_argument("--fake-gate", nargs="?", const="reject", choices=("reject", "broken"),
                        help="CPU check: screen with kernelgate.testing.FakeRunner, no worker (see the docstring)")
    parser.add_argument("--fake-fault", nargs="+", default=[], metavar="KEY",
                        help="with --fake-gate: the worker faults on these problems (keys, 1/40)")
    parser.add_argument("--keep-candidates", type=Path, help="write the generated candidates here and keep them")
    parser.add_argument("--kb-child", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--kb-reference", "--kb-candidate", "--kb-result", "--kb-settings"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kb_child:
        return kb_child(args)
    if not args.out:
        parser.error("--out is required")

    began = time.monotonic()
    deadline = began + args.deadline_s if args.deadline_s else None
    gate_deadline = began + args.gate_deadline_s if args.gate_deadline_s else deadline
    out = Path(args.out)
    resume_from = None if args.resume is None else Path(args.resume or args.out)
    record = load_record(resume_from)
    if args.resume is not None and not (resume_from and resume_from.is_file()):
        print(f"[resume] no record at {resume_from}: starting afresh")
    kernelbench = Path(args.kernelbench).resolve()
    commit_file = kernelbench / "COMMIT"
    record["kernelbench"] = {"path": args.kernelbench,
                             "commit": commit_file.read_text().strip() if commit_file.is_file() else None,
                             "eval_settings": KB_EVAL_SETTINGS}
    entries = discover(kernelbench, args.levels, args.only)
    if args.keep_candidates:
        args.keep_candidates.mkdir(parents=True, exist_ok=True)
    folder = args.keep_candidates or Path(tempfile.mkdtemp(prefix="kernelbench_all_"))
    generated = {e.key: generate(e, folder) for e in entries}
    gate_todo, kb_todo = plan(entries, record, kb_eval=args.kernelbench_eval, retry_errors=args.retry_errors,
                              limit=args.limit, shas={k: g.sha256 for k, g in generated.items()},
                              rescreen=set(args.rescreen))

    from kernelgate import ScreenOptions
    from kernelgate.many import default_concurrency, visible_devices

    gpus = visible_devices()
    concurrency = args.concurrency or (default_concurrency(len(gpus)) if gpus else None)
    options = ScreenOptions(timing_adaptive=args.adaptive)
    header = run_header(sys.argv[1:] if argv is None else argv)
    header.update(concurrency=concurrency, screen_options=options.model_dump(mode="json", exclude={"compile_cache_dir"}),
                  selected=len(entries), gate_todo=len(gate_todo), kb_todo=len(kb_todo))
    record["runs"].append(header)
    run_index = len(record["runs"]) - 1
    print(f"[plan] {len(entries)} problems selected; gate: {len(gate_todo)} to screen; "
          f"KernelBench eval: {len(kb_todo)}; concurrency {concurrency}; device {header['device'].get('name')}")

    alone = None  # --gate-alone's runner
    try:
        for entry in {e.key: e for e in gate_todo + kb_todo}.values():
            problem = record["problems"].setdefault(entry.key, {})
            problem.update(level=entry.level, problem_id=entry.problem_id, file=entry.path.name,
                           candidate={"kind": generated[entry.key].kind, "origin": generated[entry.key].origin,
                                      "sha256": generated[entry.key].sha256})
            if "footprint" not in problem:
                problem["footprint"] = footprint_record(entry.path)
        write_record(record, out)

        t_gate = time.monotonic()
        screen_kwargs = None
        if args.fake_gate:
            faulty = [f"kb_level{e.level}_{e.path.stem}" for e in entries if e.key in args.fake_fault]
            screen_kwargs = {"lanes": [fake_lane(args.fake_gate, faulty)]}
        screened = screen_gate(gate_todo, generated, record, out, options=options, concurrency=concurrency,
                               deadline=gate_deadline, run_index=run_index,
                               screen_kwargs=screen_kwargs) if gate_todo else []
        header["gate_wall_seconds"] = round(time.monotonic() - t_gate, 2)
        header["gate_screened"] = len(screened)

        t_kb = time.monotonic()
        kb_done = 0

        def out_of_time() -> bool:
            if deadline is not None and deadline - time.monotonic() < 10:
                print("[kernelbench eval] deadline reached: the rest is left for --resume")
                return True
            return False

        if args.gate_alone and kb_todo:
            alone = fake_lane(args.fake_gate, []) if args.fake_gate else _alone_pool()
        for entry in kb_todo:
            if args.kb_limit is not None and kb_done >= args.kb_limit:
                break
            if record["problems"][entry.key].get("gate") is None:
                continue  # not screened by the gate (deadline): its turn comes with it
            if out_of_time():
                break
            if alone is not None:
                record["problems"][entry.key]["gate_alone"] = screen_alone(
                    entry, generated[entry.key], alone, options, run_index)
                if out_of_time():
                    break
            timeout = args.kb_timeout_s if deadline is None else min(args.kb_timeout_s, deadline - time.monotonic())
            kb = run_kb_eval(kernelbench, entry.path, generated[entry.key].path, timeout,
                             folder / f"kb_{entry.level}_{entry.problem_id}")
            kb.update(run=run_index, candidate_sha256=generated[entry.key].sha256,
                      same_candidate_as_gate=record["problems"][entry.key]["gate"].get("candidate_sha256")
                      == generated[entry.key].sha256)
            if kb.get("timed_out") and timeout < args.kb_timeout_s:  # cut short by --deadline-s: not a result
                print(f"[kernelbench eval] {entry.key}: cut short by the deadline, not recorded")
                break
            record["problems"][entry.key]["kernelbench_eval"] = kb
            kb_done += 1
            write_record(record, out)
            print(f"[kernelbench eval {kb_done}] {entry.key} {entry.path.name}: "
                  + (f"compiled={kb.get('compiled')} correct={kb.get('correctness')} runtime={kb.get('runtime_ms')} ms"
                     if kb["finished"] else kb.get("error") or kb.get("exception"))
                  + f" ({kb['seconds_wall']} s)")
        header["kb_wall_seconds"] = round(time.monotonic() - t_kb, 2)
        header["kb_evaluated"] = kb_done
        header["wall_seconds"] = round(time.monotonic() - began, 2)
        write_record(record, out)
    finally:
        if alone is not None:
            alone.close()
        if not args.keep_candidates:
            shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({k: record["summary"][k] for k in ("screened", "by_status", "by_reason", "gate_errors",
                                                         "out_of_memory", "kernelbench_eval")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
