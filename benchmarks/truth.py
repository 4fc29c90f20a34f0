"""Independent truth labels for kernel corpora: correct? efficient? measured here, without kernelgate.

Device command (H200, repository root as the working directory; both corpora, about 6 minutes):

    python3 benchmarks/truth.py --corpus benchmarks/corpus_existing.json \\
        examples/corpus_oos/manifest.json --out "$OUT/truth_h200.json" --workers 6 \\
        --deadline-s 330 --entry-timeout-s 240 > "$OUT/truth_log.txt" 2>&1; rc=$?; \\
        tail -n 100 "$OUT/truth_log.txt"; exit $rc

(60 entries: the 34 of the study and the 26 of examples/corpus_oos/. The JSON is rewritten after
each entry, so a run cut short keeps what finished; entries not started by the deadline are
recorded as ``not_run``; rerun those with ``--only NAME ...``.)

CPU (no GPU): correctness only, in Triton's interpreter, at each entry's small ``cpu_shape``:

    .venv/bin/python benchmarks/truth.py --check-only --corpus examples/corpus_oos/manifest.json \\
        --only triton_ --out /tmp/truth_check.json

This file imports nothing from kernelgate, directly or indirectly (tests/test_truth.py checks it in
a fresh interpreter); it has its own problem table (``PROBLEMS``), input distributions, fp64 check
and timing. Each corpus entry runs in a FRESH Python process (``python truth.py _entry ...``).
``python truth.py _selftest`` (hidden, for tests/test_truth.py) answers JSON requests on stdin with
what the pure helpers, the problem table and the corpus loader give, so the tests need not import
this file.

LABEL RULE (fixed on 2026-12-04, before any result of this harness was seen)
----------------------------------------------------------------------------
* correct: for each of 3 input distributions (seeded)
      normal   x ~ N(0, 1)
      uniform  x ~ U[0, 1)                    (what examples/problems/*.py draw)
      offset   x = c + s * N(0, 1)            c/s = 100: (c, s) = (100, 1) for fp32 problems,
                                              (1, 0.01) for fp16/bf16 ones, whose outputs would
                                              overflow at 100 (fp16 GEMM: K * 100^2 > 65504)
  the candidate's output has the reference's shape, is finite, and every element satisfies
      |out - ref| <= RTOL * |ref| + ATOL * rms(ref)
  where ref is the op computed in float64 from the same (already rounded) inputs and parameters,
  rms(ref) the root mean square of ref, and (RTOL, ATOL) = (1e-4, 1e-4) for fp32, (1e-2, 1e-2)
  for fp16, (2e-2, 2e-2) for bf16 outputs. All three must pass. On a GPU the check runs at the
  timed shape. The library op is checked the same way and the result recorded
  (``library_check``) as a calibration of the tolerance; it does not change a label.
* efficient: correct and t_library / t_candidate >= 0.8, where each t is the median of
  ``triton.testing.do_bench`` samples (L2 flushed before every sample; the median of
  ``return_mode="all"`` samples, which is what ``return_mode="median"`` returns from the same
  samples) on the normal inputs, timed in the order library, candidate, library; t_library is
  the mean of the two library medians. If those two differ by more than 10% (|a - b| / min(a, b)
  > 0.10) the triple is *unstable* and timed once more; if the second triple is unstable too the
  label is ``unstable`` (no efficiency claim), else the second triple decides.
* labels: ``efficient``, ``inefficient`` (correct, ratio < 0.8), ``incorrect`` (not timed),
  ``unstable``, ``error`` (import, run or time-out failure, with the message), ``skipped``
  (``--check-only`` on a DSL that needs a GPU), ``not_run`` (the deadline passed first).

Timing details: the repetition time given to do_bench is clamp(50 x a 3-call estimate, 300 ms,
2000 ms), so a fast kernel gets thousands of samples and a 100 ms one about 20; warm-up 25 ms.
Entries run in parallel processes (``--workers``), but all GPU work of one entry (the first call,
which compiles TileLang and Triton kernels, the correctness checks, the library's first call)
holds a shared lock and its timing holds the exclusive lock, so nothing else runs on the GPU while
an entry is timed. Importing a candidate (where CUDA sources compile through load_inline) happens
outside the locks. The lock prefers shared holders (plain flock): a timer waits until no other
entry is compiling or checking; at most ``--workers`` entries exist at once, so waiting timers
throttle new ones and the timers get their turn.

The JSON holds, per entry: the label, the per-distribution errors, the timing samples (raw when
at most 1000, else the 101 percentiles 0..100), quantiles, n, the library's own check, the
kernel file's sha256; and once: device name, UUID and ``nvidia-smi -L``, torch / triton /
tilelang / CUDA versions, git commit (where a .git is present), command line, date, the rule.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import fcntl
import hashlib
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent

RULE_DATE = "2026-12-04"
EFFICIENT_RATIO = 0.8
UNSTABLE_SPREAD = 0.10
TOLERANCES = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}
"""(RTOL, ATOL) per output dtype; ATOL is in units of rms(ref)."""
DISTRIBUTIONS = ("normal", "uniform", "offset")
OFFSET = {"float32": (100.0, 1.0), "float16": (1.0, 0.01), "bfloat16": (1.0, 0.01)}
"""(c, s) of the offset distribution per problem dtype: c / s = 100 in each."""
SEEDS = {"normal": 1, "uniform": 2, "offset": 3}
PARAM_SEED = 7
MIN_REPS, MIN_REP_MS, MAX_REP_MS, WARMUP_MS = 50, 300.0, 2000.0, 25
RAW_SAMPLES_MAX = 1000
LABELS = ("efficient", "inefficient", "incorrect", "unstable", "error", "skipped", "not_run")

RULE_TEXT = (
    f"correct: output finite, right shape, |out-ref| <= RTOL*|ref| + ATOL*rms(ref) elementwise vs float64 ref, "
    f"on all of {list(DISTRIBUTIONS)} (offset: c + s*N(0,1), c/s = 100), (RTOL, ATOL) per dtype {TOLERANCES}; "
    f"efficient: correct and t_lib/t_cand >= {EFFICIENT_RATIO}, t = median of do_bench samples (L2 flushed), "
    f"t_lib = mean(lib before, lib after); unstable if |before-after|/min > {UNSTABLE_SPREAD}: retimed once, "
    f"label 'unstable' if still so. Fixed {RULE_DATE} before any result.")


# --------------------------------------------------------------------------------------------
# The problem table (own copy of the semantics and shapes of examples/problems/*.py and of the
# reference_ops catalogue entries the corpora use; no code is imported from either)
# --------------------------------------------------------------------------------------------

@dataclass
class ProblemDef:
    name: str
    dtype: str
    shape: dict[str, int]
    """The timed (GPU) shape."""
    small: dict[str, int]
    """Default CPU (--check-only) shape."""
    input_shapes: Callable[[dict], list[tuple[int, ...]]]
    library: Callable  # (inputs, params) -> tensor, at the problem's dtype
    ref64: Callable  # (inputs64, params64) -> float64 tensor
    init_args: Callable[[dict], list] = lambda s: []
    param_shapes: Callable[[dict], list[tuple[int, ...]]] = lambda s: []
    gate: str = ""
    """How kernelgate names this problem (for the reader; not used here)."""
    matmul_fp32_strict: bool = False


def _torch():
    import torch
    return torch


def _F():
    import torch.nn.functional as F
    return F


def _layernorm_lib(inputs, params):
    (x,), (w, b) = inputs, params
    return _F().layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _layernorm_64(inputs, params):
    (x,), (w, b) = inputs, params
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (var + 1e-5).sqrt() * w + b


def _rmsnorm_lib(inputs, params):
    (x,), (w,) = inputs, params
    return _F().rms_norm(x, (x.shape[-1],), w, eps=1e-6)


def _rmsnorm_64(inputs, params):
    (x,), (w,) = inputs, params
    return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt() * w


def _sdpa_64(inputs, params):
    q, k, v = inputs
    torch = _torch()
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(q.shape[-1])
    for b in range(q.shape[0]):  # one batch at a time: the fp64 score matrix stays a few hundred MB
        s = torch.matmul(q[b], k[b].transpose(-1, -2)) * scale
        out[b] = torch.matmul(torch.softmax(s, dim=-1), v[b])
    return out


PROBLEMS: dict[str, ProblemDef] = {p.name: p for p in [
    ProblemDef("rowsum", "float32", {"ROWS": 4096, "COLS": 8192}, {"ROWS": 16, "COLS": 1024},
               lambda s: [(s["ROWS"], s["COLS"])],
               lambda i, p: _torch().sum(i[0], dim=-1), lambda i, p: i[0].sum(-1),
               gate="examples/problems/rowsum.py"),
    ProblemDef("softmax", "float32", {"ROWS": 4096, "COLS": 8192}, {"ROWS": 16, "COLS": 1024},
               lambda s: [(s["ROWS"], s["COLS"])],
               lambda i, p: _torch().softmax(i[0], dim=-1), lambda i, p: _torch().softmax(i[0], dim=-1),
               gate="examples/problems/softmax.py"),
    ProblemDef("layernorm", "float32", {"BATCH": 4096, "HIDDEN": 4096}, {"BATCH": 16, "HIDDEN": 512},
               lambda s: [(s["BATCH"], s["HIDDEN"])], _layernorm_lib, _layernorm_64,
               init_args=lambda s: [(s["HIDDEN"],)], param_shapes=lambda s: [(s["HIDDEN"],), (s["HIDDEN"],)],
               gate="examples/problems/layernorm.py"),
    ProblemDef("rmsnorm", "float32", {"BATCH": 4096, "HIDDEN": 4096}, {"BATCH": 16, "HIDDEN": 512},
               lambda s: [(s["BATCH"], s["HIDDEN"])], _rmsnorm_lib, _rmsnorm_64,
               init_args=lambda s: [s["HIDDEN"]], param_shapes=lambda s: [(s["HIDDEN"],)],
               gate="examples/problems/rmsnorm.py"),
    ProblemDef("matmul_fp32", "float32", {"M": 4096, "N": 4096, "K": 4096}, {"M": 64, "N": 64, "K": 64},
               lambda s: [(s["M"], s["K"]), (s["K"], s["N"])],
               lambda i, p: _torch().matmul(i[0], i[1]), lambda i, p: _torch().matmul(i[0], i[1]),
               gate="examples/problems/matmul.py (strict fp32: TF32 off)", matmul_fp32_strict=True),
    ProblemDef("matmul_fp16", "float16", {"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 128, "K": 64},
               lambda s: [(s["M"], s["K"]), (s["K"], s["N"])],
               lambda i, p: _torch().matmul(i[0], i[1]), lambda i, p: _torch().matmul(i[0], i[1]),
               gate="examples/problems/matmul_fp16.py"),
    ProblemDef("matmul_bf16", "bfloat16", {"m": 4096, "n": 4096, "k": 4096}, {"m": 128, "n": 128, "k": 64},
               lambda s: [(s["m"], s["k"]), (s["k"], s["n"])],
               lambda i, p: _torch().matmul(i[0], i[1]), lambda i, p: _torch().matmul(i[0], i[1]),
               gate="catalogue op matmul, dtype bfloat16"),
    ProblemDef("gelu", "float32", {"rows": 4096, "cols": 16384}, {"rows": 64, "cols": 512},
               lambda s: [(s["rows"], s["cols"])],
               lambda i, p: _F().gelu(i[0]), lambda i, p: 0.5 * i[0] * (1.0 + _torch().erf(i[0] / math.sqrt(2.0))),
               gate="catalogue op gelu, dtype float32"),
    ProblemDef("conv2d_fp16", "float16",
               {"batch": 8, "in_channels": 64, "out_channels": 128, "height": 256, "width": 512,
                "kernel_h": 3, "kernel_w": 3},
               {"batch": 1, "in_channels": 8, "out_channels": 16, "height": 12, "width": 20,
                "kernel_h": 3, "kernel_w": 3},
               lambda s: [(s["batch"], s["in_channels"], s["height"], s["width"]),
                          (s["out_channels"], s["in_channels"], s["kernel_h"], s["kernel_w"])],
               lambda i, p: _F().conv2d(i[0], i[1]), lambda i, p: _F().conv2d(i[0], i[1]),
               gate="catalogue op conv2d, dtype float16 (stride 1, no padding, no bias)"),
    ProblemDef("sdpa_fp16", "float16", {"batch": 16, "heads": 16, "seq": 2048, "head_dim": 128},
               {"batch": 1, "heads": 2, "seq": 64, "head_dim": 32},
               lambda s: [(s["batch"], s["heads"], s["seq"], s["head_dim"])] * 3,
               lambda i, p: _F().scaled_dot_product_attention(*i), _sdpa_64,
               gate="catalogue op sdpa, dtype float16 (non-causal, scale 1/sqrt(head_dim))"),
]}


# --------------------------------------------------------------------------------------------
# Pure helpers (no torch): the label rule, tolerances; tested on synthetic numbers
# --------------------------------------------------------------------------------------------

def spread(a: float, b: float) -> float:
    """|a - b| / min(a, b): how far the library's before and after medians are apart."""
    return abs(a - b) / min(a, b)


def label_from(correct: bool | None, triples: list[dict]) -> dict:
    """The label from the correctness result and the timing triples, in the order they were taken.

    Each triple: ``{"lib_before_ms", "cand_ms", "lib_after_ms"}`` (medians). The first triple decides
    unless it is unstable; then the second one does, and a second unstable one gives ``unstable``.
    """
    if correct is None:
        raise ValueError("label_from: correctness unknown")
    if not correct:
        return {"label": "incorrect", "ratio": None, "t_library_ms": None, "t_candidate_ms": None}
    if not triples:
        raise ValueError("label_from: a correct entry needs at least one timing triple")
    if len(triples) > 2:
        raise ValueError("label_from: at most one retime")
    for i, t in enumerate(triples):
        a, c, b = t["lib_before_ms"], t["cand_ms"], t["lib_after_ms"]
        if min(a, b, c) <= 0 or not all(math.isfinite(v) for v in (a, b, c)):
            raise ValueError(f"label_from: non-positive or non-finite time in {t}")
        if spread(a, b) > UNSTABLE_SPREAD:
            if i == 0 and len(triples) == 1:
                return {"label": "unstable", "ratio": None, "t_library_ms": None, "t_candidate_ms": None,
                        "needs_retime": True}
            if i == len(triples) - 1:
                return {"label": "unstable", "ratio": None, "t_library_ms": None, "t_candidate_ms": None}
            continue
        t_lib = (a + b) / 2
        ratio = t_lib / c
        return {"label": "efficient" if ratio >= EFFICIENT_RATIO else "inefficient", "ratio": ratio,
                "t_library_ms": t_lib, "t_candidate_ms": c, "decided_by_triple": i}
    raise AssertionError("unreachable")


def tolerance_for(dtype: str) -> tuple[float, float]:
    return TOLERANCES[dtype]


def summarize_samples(samples: list[float]) -> dict:
    """Median (as do_bench's return_mode="median": statistics.median), quantiles, n, and the samples."""
    s = sorted(samples)
    n = len(s)

    def q(p: float) -> float:  # linear interpolation between order statistics
        pos = p * (n - 1)
        lo = int(math.floor(pos))
        hi = min(lo + 1, n - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    out = {"n": n, "median_ms": statistics.median(samples), "min_ms": s[0], "max_ms": s[-1],
           "quantiles_ms": {str(p): q(p) for p in (0.1, 0.25, 0.5, 0.75, 0.9)}}
    if n <= RAW_SAMPLES_MAX:
        out["samples_ms"] = [round(v, 6) for v in samples]
    else:
        out["percentiles_ms"] = [round(q(i / 100), 6) for i in range(101)]
    return out


# --------------------------------------------------------------------------------------------
# The child: one corpus entry in a fresh process
# --------------------------------------------------------------------------------------------

class GpuLocks:
    """Shared lock for GPU work that need not be isolated, exclusive lock for timing (flock on one
    file in the folder the parent made; no folder: no locking, as in --check-only)."""

    def __init__(self, folder: str | None):
        self.folder = folder
        self.waits_s: list[float] = []

    @contextmanager
    def hold(self, exclusive: bool):
        if not self.folder:
            yield
            return
        with open(os.path.join(self.folder, "gpu.lock"), "a+") as f:
            t = time.perf_counter()
            fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            self.waits_s.append(round(time.perf_counter() - t, 3))
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def _draw(torch, shape, dtype, dist: str, gen, device):
    if dist == "normal":
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    elif dist == "uniform":
        x = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
    elif dist == "offset":
        c, s = OFFSET[PROBLEM_DTYPE_NAME[dtype]]
        x = c + s * torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    return x.to(dtype)


PROBLEM_DTYPE_NAME: dict = {}


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"truth_candidate_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def compare(torch, out, ref64, dtype_name: str) -> dict:
    """The fp64 check of one output against its float64 reference (the rule in the docstring)."""
    rtol, atol = tolerance_for(dtype_name)
    if not isinstance(out, torch.Tensor):
        return {"passed": False, "why": f"output is a {type(out).__name__}, not a tensor"}
    if tuple(out.shape) != tuple(ref64.shape):
        return {"passed": False, "why": f"shape {tuple(out.shape)} != reference {tuple(ref64.shape)}"}
    o = out.detach().to(torch.float64)
    finite = bool(torch.isfinite(o).all())
    rms = float(ref64.pow(2).mean().sqrt())
    diff = (o - ref64).abs()
    bound = rtol * ref64.abs() + atol * rms
    scaled = diff / bound.clamp_min(1e-300)
    worst = float(scaled.max()) if diff.numel() else 0.0
    ok = finite and worst <= 1.0
    res = {"passed": ok, "finite": finite, "max_abs_err": float(diff.max()) if diff.numel() else 0.0,
           "max_err_over_bound": worst, "ref_rms": rms, "out_dtype": str(out.dtype).replace("torch.", "")}
    if not finite:
        res["why"] = "non-finite values in the output"
    elif not ok:
        res["why"] = f"max |out-ref| / bound = {worst:.3g} > 1"
    return res


def _sync_params(torch, model, values: list) -> dict:
    """Copy the problem's parameters (drawn with PARAM_SEED) into the candidate, in order and by shape."""
    if not values:
        return {"synced": 0}
    params = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    shapes = [tuple(p.shape) for p in params]
    want = [tuple(v.shape) for v in values]
    if shapes != want:
        raise ValueError(f"the candidate's parameters {shapes} do not match the problem's {want}")
    with torch.no_grad():
        for p, v in zip(params, values):
            p.copy_(v.to(p.device, p.dtype))
    return {"synced": len(values)}


def _bench(torch, triton_testing, fn) -> dict:
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        fn()
    end.record()
    torch.cuda.synchronize()
    est = start.elapsed_time(end) / 3
    rep = min(max(MIN_REPS * est, MIN_REP_MS), MAX_REP_MS)
    samples = triton_testing.do_bench(fn, warmup=WARMUP_MS, rep=rep, return_mode="all")
    out = summarize_samples(list(samples))
    out["rep_ms"] = rep
    out["estimate_ms"] = est
    return out


def run_entry(entry: dict, check_only: bool, lock_dir: str | None) -> dict:
    """One corpus entry, in this (fresh) process. Returns the result record."""
    result: dict = {"name": entry["name"], "kernel": entry["kernel"], "problem": entry["problem"],
                    "dsl": entry["dsl"], "intent": entry.get("intent")}
    path = ROOT / entry["kernel"]
    result["kernel_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    prob = PROBLEMS[entry["problem"]]
    shape = dict(prob.small if check_only else prob.shape)
    shape.update(entry.get("cpu_shape" if check_only else "shape") or {})
    result["shape"] = shape
    result["dtype"] = prob.dtype
    if check_only and entry["dsl"] != "triton":
        result.update(label="skipped", why=f"--check-only runs Triton in its interpreter; {entry['dsl']} needs a GPU")
        return result

    import torch
    PROBLEM_DTYPE_NAME.update({torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"})
    dtype = getattr(torch, prob.dtype)
    device = torch.device("cpu" if check_only else "cuda")
    if prob.matmul_fp32_strict:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    locks = GpuLocks(lock_dir)
    phase = "import"
    t0 = time.perf_counter()
    try:
        module = _load_module(path)
        result["import_s"] = round(time.perf_counter() - t0, 3)
        entry_name = entry.get("entry", "ModelNew")
        obj = getattr(module, entry_name)
        phase = "construct"
        model = obj(*prob.init_args(shape)) if isinstance(obj, type) else obj
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
        pgen = torch.Generator(device="cpu").manual_seed(PARAM_SEED)
        pshapes = prob.param_shapes(shape)
        # weights near 1 and biases near 0, random so that a kernel ignoring them fails
        params = [(1.0 if i == 0 else 0.0) + 0.1 * torch.randn(s, generator=pgen) for i, s in enumerate(pshapes)]
        params = [p.to(device) for p in params]
        result["params"] = _sync_params(torch, model, params)
        params_lp = [p.to(dtype) if prob.dtype != "float32" else p for p in params]

        checks, lib_checks = {}, {}
        timing_inputs = None
        with locks.hold(exclusive=False), torch.no_grad():
            for dist in DISTRIBUTIONS:
                phase = f"check {dist}"
                gen = torch.Generator(device=device).manual_seed(SEEDS[dist])
                inputs = [_draw(torch, s, dtype, dist, gen, device) for s in prob.input_shapes(shape)]
                ref = prob.ref64([x.to(torch.float64) for x in inputs], [p.to(torch.float64) for p in params_lp])
                t1 = time.perf_counter()
                out = model(*[x.clone() for x in inputs])
                if device.type == "cuda":
                    torch.cuda.synchronize()
                checks[dist] = compare(torch, out, ref, prob.dtype)
                checks[dist]["seconds"] = round(time.perf_counter() - t1, 3)
                lib_checks[dist] = compare(torch, prob.library(inputs, params_lp), ref, prob.dtype)
                del out, ref
                if dist == "normal":
                    timing_inputs = inputs
            if device.type == "cuda":
                torch.cuda.synchronize()
        correct = all(c["passed"] for c in checks.values())
        result.update(correct=correct, checks=checks, library_check=lib_checks)
        if check_only:
            result["label"] = "correct" if correct else "incorrect"
            result["note"] = "check only (no timing): correct/incorrect at the small shape, not a label"
            return result
        if not correct:
            result.update(label_from(False, []))
            return result

        phase = "timing"
        import triton.testing as triton_testing
        cand = lambda: model(*timing_inputs)  # noqa: E731
        lib = lambda: prob.library(timing_inputs, params_lp)  # noqa: E731
        triples = []
        with torch.no_grad():
            for attempt in range(2):
                with locks.hold(exclusive=True):
                    tb = _bench(torch, triton_testing, lib)
                    tc = _bench(torch, triton_testing, cand)
                    ta = _bench(torch, triton_testing, lib)
                triples.append({"lib_before": tb, "cand": tc, "lib_after": ta,
                                "lib_before_ms": tb["median_ms"], "cand_ms": tc["median_ms"],
                                "lib_after_ms": ta["median_ms"],
                                "spread": spread(tb["median_ms"], ta["median_ms"])})
                decision = label_from(True, [{k: t[k] for k in ("lib_before_ms", "cand_ms", "lib_after_ms")}
                                             for t in triples])
                if not decision.pop("needs_retime", False):
                    break
        result["timing"] = triples
        result.update(decision)
        return result
    except Exception as exc:  # the record says what failed, and where
        result.update(label="error", phase=phase, error=f"{type(exc).__name__}: {exc}"[:2000],
                      traceback=traceback.format_exc()[-4000:])
        return result
    finally:
        result["lock_waits_s"] = locks.waits_s


# --------------------------------------------------------------------------------------------
# The parent: corpus files, the worker pool, metadata, the JSON
# --------------------------------------------------------------------------------------------

def load_corpus(paths: list[Path]) -> list[dict]:
    """Entries from corpus JSON files: a list, or an object with an ``entries`` (or ``kernels``) list."""
    entries = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        items = data if isinstance(data, list) else data.get("entries", data.get("kernels"))
        if items is None:
            raise ValueError(f"{p}: no 'entries' or 'kernels' list")
        for e in items:
            missing = {"name", "kernel", "problem", "dsl"} - set(e)
            if missing:
                raise ValueError(f"{p}: entry {e.get('name', '?')} lacks {', '.join(sorted(missing))}")
            if e["problem"] not in PROBLEMS:
                raise ValueError(f"{p}: entry {e['name']}: unknown problem {e['problem']!r}; "
                                 f"known: {', '.join(PROBLEMS)}")
            if not (ROOT / e["kernel"]).is_file():
                raise FileNotFoundError(f"{p}: entry {e['name']}: no file {e['kernel']}")
            entries.append({**e, "corpus": str(p)})
    names = [e["name"] for e in entries]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"duplicate entry names: {', '.join(sorted(dup))}")
    return entries


def _cmd(args: list[str]) -> str | None:
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=ROOT)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def metadata(check_only: bool) -> dict:
    import torch
    import triton
    try:
        from importlib.metadata import version
        tilelang_version = version("tilelang")
    except Exception:
        tilelang_version = None
    meta = {
        "command": " ".join([sys.executable, *sys.argv]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "versions": {"torch": torch.__version__, "triton": triton.__version__, "tilelang": tilelang_version,
                     "cuda": torch.version.cuda, "python": platform.python_version()},
        # an exported tree (the device call) has no .git: its commit comes in KERNELGATE_COMMIT
        "git_commit": _cmd(["git", "rev-parse", "HEAD"]) or os.environ.get("KERNELGATE_COMMIT"),
        "git_status_porcelain": _cmd(["git", "status", "--porcelain", "--", "benchmarks/truth.py",
                                      "benchmarks/corpus_existing.json", "examples"]),
        "mode": "check_only" if check_only else "label",
        "rule": RULE_TEXT,
        "tolerances": {k: {"rtol": v[0], "atol_times_rms": v[1]} for k, v in TOLERANCES.items()},
        "offset_distribution": {k: {"c": v[0], "s": v[1]} for k, v in OFFSET.items()},
        "timing": {"min_reps": MIN_REPS, "rep_ms_clamp": [MIN_REP_MS, MAX_REP_MS], "warmup_ms": WARMUP_MS},
    }
    if not check_only:
        props = torch.cuda.get_device_properties(0)
        meta["device"] = {"name": props.name, "uuid": str(getattr(props, "uuid", None)),
                          "sm_count": props.multi_processor_count, "total_memory": props.total_memory,
                          "capability": f"{props.major}.{props.minor}",
                          "nvidia_smi_L": _cmd(["nvidia-smi", "-L"])}
    else:
        meta["device"] = {"name": f"cpu ({platform.machine()}), Triton interpreter"}
    return meta


def _summary(results: list[dict]) -> dict:
    out: dict = {"entries": len(results), "labels": {}}
    for r in results:
        out["labels"][r["label"]] = out["labels"].get(r["label"], 0) + 1
    intents = [(r.get("intent"), r["label"]) for r in results if r.get("intent") in ("efficient", "inefficient")
               and r["label"] in ("efficient", "inefficient")]
    if intents:
        out["intent_matches_label"] = sum(i == lab for i, lab in intents)
        out["with_intent_and_label"] = len(intents)
    return out


def _write(out: Path, meta: dict, results: list[dict]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps({"meta": meta, "summary": _summary(results), "entries": results}, indent=1))
    os.replace(tmp, out)


def _dsl_order(e: dict) -> int:
    # slow compilers first, so that their compile time overlaps other entries' GPU work
    return {"cuda": 0, "tilelang": 1}.get(e["dsl"], 2)


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "_entry":
        return _child_main(argv[1:])
    if argv and argv[0] == "_selftest":
        return _selftest_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", nargs="+", type=Path, required=True, help="corpus JSON file(s)")
    parser.add_argument("--out", type=Path, required=True, help="the results JSON (rewritten after each entry)")
    parser.add_argument("--check-only", action="store_true",
                        help="no GPU: the fp64 check only, Triton in its interpreter, at each entry's cpu_shape")
    parser.add_argument("--only", nargs="+", metavar="WORD", help="entries whose name contains one of these")
    parser.add_argument("--workers", type=int, default=1, help="entries run at once (GPU work is locked)")
    parser.add_argument("--deadline-s", type=float, default=None, help="start nothing after this; kill at it")
    parser.add_argument("--entry-timeout-s", type=float, default=600.0, help="per-entry process time limit")
    args = parser.parse_args(argv)

    entries = load_corpus(args.corpus)
    if args.only:
        entries = [e for e in entries if any(w in e["name"] for w in args.only)]
    if not entries:
        print("truth.py: no entry selected", file=sys.stderr)
        return 2
    if not args.check_only:
        import torch
        if not torch.cuda.is_available():
            print("truth.py: no CUDA GPU is visible, and labels need timing on a GPU. Nothing was labelled. "
                  "Use --check-only for the fp64 correctness check alone (Triton interpreter, small shapes).",
                  file=sys.stderr)
            return 3
    meta = metadata(args.check_only)
    started = time.monotonic()
    deadline = started + args.deadline_s if args.deadline_s else None
    lock_dir = None if args.check_only else tempfile.mkdtemp(prefix="truth_locks_")
    order = sorted(range(len(entries)), key=lambda i: (_dsl_order(entries[i]), i))
    results: list[dict | None] = [None] * len(entries)
    write_lock = threading.Lock()

    def finish(i: int, rec: dict) -> None:
        with write_lock:
            results[i] = rec
            done = [r for r in results if r is not None]
            _write(args.out, {**meta, "elapsed_s": round(time.monotonic() - started, 1)}, done)
            extra = f" ratio {rec['ratio']:.3f}" if rec.get("ratio") is not None else ""
            why = f" ({rec.get('error') or rec.get('why') or ''})" if rec["label"] in ("error", "skipped") else ""
            print(f"{rec['name']:<44} {rec['label']:<11}{extra}{why[:200]}", flush=True)

    def one(i: int) -> None:
        e = entries[i]
        base = {k: e.get(k) for k in ("name", "kernel", "problem", "dsl", "intent")}
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            finish(i, {**base, "label": "not_run", "why": "deadline passed before it started"})
            return
        limit = args.entry_timeout_s if deadline is None else max(1.0, min(args.entry_timeout_s, deadline + 20 - now))
        env = dict(os.environ)
        if args.check_only:
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)  # compiled kernels on the GPU, never the interpreter
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            res_path = f.name
        cmd = [sys.executable, str(Path(__file__).resolve()), "_entry", json.dumps(e), res_path,
               "--check-only" if args.check_only else "--gpu", lock_dir or ""]
        t = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env, cwd=ROOT)
            try:
                rec = json.loads(Path(res_path).read_text())
            except (OSError, json.JSONDecodeError):
                rec = {**base, "label": "error", "phase": "process",
                       "error": f"the entry process exited {proc.returncode} without a result",
                       "stderr_tail": proc.stderr[-3000:]}
        except subprocess.TimeoutExpired:
            rec = {**base, "label": "error", "phase": "process", "error": f"timed out after {limit:.0f} s"}
        finally:
            Path(res_path).unlink(missing_ok=True)
        rec["process_s"] = round(time.monotonic() - t, 2)
        finish(i, rec)

    print(f"truth.py: {len(entries)} entries, {'check only (CPU)' if args.check_only else meta['device']['name']}, "
          f"{args.workers} worker(s)", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        list(pool.map(one, order))
    if lock_dir:
        shutil.rmtree(lock_dir, ignore_errors=True)
    final = [r for r in results if r is not None]
    _write(args.out, {**meta, "elapsed_s": round(time.monotonic() - started, 1)}, final)
    print(json.dumps(_summary(final), indent=1))
    print(f"wrote {args.out}")
    return 0


SELFTEST_OPS = ("constants", "spread", "label", "summarize", "compare", "problems", "load_corpus", "check_entry",
                "modules")


def _selftest_one(req: dict):
    """One ``_selftest`` request -> its JSON-able answer (an exception propagates to the caller)."""
    op = req["op"]
    if op == "constants":
        return {"EFFICIENT_RATIO": EFFICIENT_RATIO, "UNSTABLE_SPREAD": UNSTABLE_SPREAD, "TOLERANCES": TOLERANCES,
                "DISTRIBUTIONS": list(DISTRIBUTIONS), "LABELS": list(LABELS), "RULE_DATE": RULE_DATE,
                "RAW_SAMPLES_MAX": RAW_SAMPLES_MAX}
    if op == "spread":
        return spread(req["a"], req["b"])
    if op == "label":
        return label_from(req["correct"], req["triples"])
    if op == "summarize":
        return summarize_samples(req["samples"])
    if op == "compare":  # values as (nested) lists: out cast to out_dtype, ref held in float64
        import torch
        ref = torch.tensor(req["ref"], dtype=torch.float64)
        out = torch.tensor(req["out"], dtype=torch.float64).to(getattr(torch, req.get("out_dtype", req["dtype"])))
        return compare(torch, out, ref, req["dtype"])
    if op == "problems":
        return {name: {"dtype": p.dtype, "shape": p.shape, "small": p.small, "gate": p.gate,
                       "matmul_fp32_strict": p.matmul_fp32_strict} for name, p in PROBLEMS.items()}
    if op == "load_corpus":
        return load_corpus([Path(x) for x in req["paths"]])
    if op == "check_entry":  # the --check-only path of one entry, in this process
        return run_entry(req["entry"], check_only=True, lock_dir=None)
    if op == "modules":  # which modules are loaded now whose top-level name is one of ``prefixes``
        prefixes = set(req["prefixes"])
        return sorted(k for k in sys.modules if k.split(".")[0] in prefixes)
    raise LookupError(f"unknown _selftest op {op!r}; known: {', '.join(SELFTEST_OPS)}")


def _selftest_main(argv: list[str]) -> int:
    """``truth.py _selftest``: a JSON list of requests on stdin (``{"op": ..., ...}``), answered in order in
    this one process, as a JSON list on stdout: ``{"value": ...}`` or ``{"error": TYPE, "message": ...}``.
    An unknown op or unreadable input exits 2."""
    try:
        requests = json.loads(sys.stdin.read())
        if not isinstance(requests, list) or not all(isinstance(r, dict) and r.get("op") in SELFTEST_OPS
                                                      for r in requests):
            raise ValueError(f"expected a JSON list of requests with an op among {', '.join(SELFTEST_OPS)}")
    except ValueError as exc:
        print(f"truth.py _selftest: {exc}", file=sys.stderr)
        return 2
    answers = []
    for req in requests:
        try:
            answers.append({"value": _selftest_one(req)})
        except Exception as exc:
            answers.append({"error": type(exc).__name__, "message": str(exc)})
    print(json.dumps(answers))
    return 0


def _child_main(argv: list[str]) -> int:
    entry, res_path, mode, lock_dir = json.loads(argv[0]), argv[1], argv[2], argv[3] or None
    rec = run_entry(entry, check_only=(mode == "--check-only"), lock_dir=lock_dir)
    Path(res_path).write_text(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
