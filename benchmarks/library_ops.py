"""How close the vendor library gets to the roofline, op by op: U_library = t_floor / t_library.

    python benchmarks/library_ops.py --out benchmarks/results/library_ops_h200.json
    python benchmarks/library_ops.py --only matmul conv2d --out /tmp/some.json
    python benchmarks/library_ops.py --smoke --out /tmp/smoke.json      # CPU, tiny shapes
    python benchmarks/library_ops.py --only conv2d conv3d --cudnn-benchmark --out /tmp/conv_autotuned.json

On a GPU, every catalogue op (or those named by ``--only``) is timed at its default shape in
each of its dtypes (fp32 for all; fp16 and bf16 for GEMM, convolution, attention and the
normalizations) the way the gate times the library: ``kernelgate.timing.time_pair`` with the
library on both sides (L2 flushed by a 256 MB write before every call, CUDA events, inputs
rotated over three sets, 30 repetitions). The second side is the same call again, so its median
shows how well the time repeats. The floor is ``kernelgate.roofline.t_floor_ms`` with the peaks
the gate would use (``kernelgate.hardware.peaks_for``: the calibration cache when
``kernelgate calibrate`` has run, else the datasheet row; the JSON records which) in the math
mode of the op's dtype, as the gate's "library U". One more call runs under the profiler to record
the kernels the library launched (cuBLAS tile and split-K choices, cuDNN's implicit GEMM or
Winograd, ATen's reduce kernels). Flags: U_library below the policy's ``u_min`` (0.3) is
"library far below the bound"; above 1, "library above the naive bound" (TF32 or Winograd in an
fp32 problem, or an F that overcounts).

``--smoke`` runs on the CPU at each op's ``smoke_shape`` with ``time.perf_counter`` and records
the ATen ops instead of kernels; its floors use the H200 datasheet row. It only shows that the
script works: its times and U are not results. The JSON then says ``"smoke": true``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

from kernelgate import __version__, roofline
from kernelgate.hardware import detect, match_spec, peaks_for
from kernelgate.policy import DEFAULT_POLICY
from kernelgate.reference_ops import DTYPES, ReferenceOp, get_op, list_ops
from kernelgate.timing import L2_FLUSH_BYTES, stats, time_pair

FAR_BELOW = DEFAULT_POLICY.u_min
ABOVE = 1.0
SMOKE_PEAKS_DEVICE = "NVIDIA H200"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the results JSON to write")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only these ops (default: the whole catalogue)")
    parser.add_argument("--dtypes", nargs="+", choices=list(DTYPES), help="only these dtypes (of each op's own)")
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions (default 30; --smoke: 5)")
    parser.add_argument("--input-sets", type=int, default=3, help="input sets rotated through (default 3)")
    parser.add_argument("--max-seconds", type=float, default=60.0,
                        help="stop timing one op after this long (at least 5 repetitions)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="CPU at tiny shapes: checks the script, not the library")
    parser.add_argument("--cudnn-benchmark", action="store_true",
                        help="let cuDNN time its algorithms and keep the fastest (torch.backends.cudnn.benchmark); "
                             "compare with a run without it to see what the library's own algorithm choice is worth")
    args = parser.parse_args(argv)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    try:
        ops = [get_op(name) for name in args.only] if args.only else list_ops()
    except KeyError as exc:
        parser.error(str(exc.args[0]))
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        parser.error("no CUDA GPU here: run on the GPU, or pass --smoke for the CPU check")
    reps = args.reps or (5 if args.smoke else 30)

    info = detect() if cuda else None
    peaks = peaks_for(info) if cuda else match_spec(SMOKE_PEAKS_DEVICE)
    entries = []
    for op in ops:
        for dtype in op.dtypes:
            if args.dtypes and dtype not in args.dtypes:
                continue
            shape = op.shape(op.smoke_shape if args.smoke else None)
            began = time.perf_counter()
            try:
                entry = _measure(op, dtype, shape, peaks, cuda=cuda, reps=reps, input_sets=args.input_sets,
                                 max_seconds=args.max_seconds, seed=args.seed)
            except (RuntimeError, MemoryError) as exc:  # recorded, and the exit code says so
                entry = {**_describe(op, dtype, shape), "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
            entry["seconds"] = round(time.perf_counter() - began, 3)
            entries.append(entry)
            print(_progress(entry), file=sys.stderr, flush=True)
            if cuda:
                torch.cuda.empty_cache()

    record = {
        "command": " ".join(["python benchmarks/library_ops.py", *(sys.argv[1:] if argv is None else argv)]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "smoke": bool(args.smoke),
        "device": (info.model_dump(mode="json") if info is not None
                   else {"name": f"cpu ({platform.processor() or platform.machine()})"}),
        "versions": _versions(),
        "math_flags": {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                       "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                       "cudnn.benchmark": torch.backends.cudnn.benchmark,
                       "float32_matmul_precision": torch.get_float32_matmul_precision()},
        "peaks": peaks.model_dump(mode="json"),
        "peaks_note": (f"peaks_for() on this device: {peaks.kind} ({peaks.source})" if cuda else
                       f"smoke run: nothing was timed on a GPU; floors use the {peaks.device_name} datasheet row"),
        "timing": ({"method": "kernelgate.timing.time_pair, the library on both sides", "reps": reps,
                    "input_sets": args.input_sets, "l2_flush_bytes": L2_FLUSH_BYTES, "clock": "CUDA events"}
                   if cuda else {"method": "time.perf_counter on the CPU", "reps": reps,
                                 "input_sets": args.input_sets, "l2_flush_bytes": 0, "clock": "host"}),
        "flags": {"far_below": f"U_library < {FAR_BELOW:g}: library far below the bound",
                  "above": f"U_library > {ABOVE:g}: library above the naive bound"},
        "ops": entries,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    print(markdown_table(entries))
    print(f"\n{len(entries)} timings written to {out}" + (" (smoke: CPU, not results)" if args.smoke else ""))
    return 1 if any("error" in e for e in entries) else 0


def _describe(op: ReferenceOp, dtype: str, shape: dict[str, int]) -> dict:
    element = torch.empty((), dtype=DTYPES[dtype]).element_size()
    return {"name": op.name, "category": op.category, "dtype": dtype, "shape": dict(shape),
            "kernelbench_level1": list(op.kernelbench_level1),
            "flops": op.flops(shape), "bytes": op.bytes_compulsory(shape, element)}


def _measure(op: ReferenceOp, dtype: str, shape: dict[str, int], peaks, *, cuda: bool, reps: int,
             input_sets: int, max_seconds: float, seed: int) -> dict:
    entry = _describe(op, dtype, shape)
    device = "cuda" if cuda else "cpu"
    gen = torch.Generator(device=device).manual_seed(seed)
    sets = [op.make_inputs(shape, DTYPES[dtype], "normal", gen, device) for _ in range(input_sets)]
    if cuda:
        report = time_pair(op.reference, op.reference, sets, reps=reps, max_seconds=max_seconds)
        timed, repeat = report.library, report.candidate
        kernels = _cuda_kernels(op.reference, sets[0])
    else:
        timed, repeat = _time_host(op.reference, sets, reps), _time_host(op.reference, sets, reps)
        kernels = _cpu_ops(op.reference, sets[0])
    del sets
    flops, nbytes = entry["flops"], entry["bytes"]
    mode, physics_mode = op.math_mode(dtype), op.peak_mode(dtype)
    floor = roofline.t_floor_ms(flops, nbytes, peaks, mode)
    floor_physics = roofline.t_floor_ms(flops, nbytes, peaks, physics_mode)
    u = roofline.utilization(floor, timed.median_ms)
    flag = ("library far below the bound" if u < FAR_BELOW else
            "library above the naive bound" if u > ABOVE else None)
    entry.update({
        "t_library_ms": timed.median_ms, "t_library_p20_ms": timed.p20_ms, "t_library_p80_ms": timed.p80_ms,
        "t_library_min_ms": timed.min_ms, "t_library_wall_ms": timed.wall_median_ms, "reps": timed.reps,
        "t_library_repeat_ms": repeat.median_ms,
        "math_mode": mode.value, "t_floor_ms": floor, "bound": roofline.bound(flops, nbytes, peaks, mode),
        "u_library": _finite(u),
        "peak_mode": physics_mode.value, "t_floor_physics_ms": floor_physics,
        "u_library_physics": _finite(roofline.utilization(floor_physics, timed.median_ms)),
        "flag": flag, "kernels": kernels,
    })
    return entry


def _time_host(fn, sets: list[list], reps: int, warmup: int = 2):
    """CPU smoke timing: perf_counter around each call, inputs rotated over the sets."""
    samples = []
    with torch.no_grad():
        for i in range(warmup):
            fn(*sets[i % len(sets)])
        for rep in range(reps):
            t0 = time.perf_counter()
            fn(*sets[rep % len(sets)])
            samples.append((time.perf_counter() - t0) * 1e3)
    return stats(samples, samples)


def _cuda_kernels(fn, inputs: list) -> list[dict]:
    """The kernels one library call launched, by device time (the profiler's CUDA activity)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad():
        fn(*inputs)
        torch.cuda.synchronize()
    found: dict[str, list[float]] = {}
    for event in prof.events():
        if getattr(event, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        device_us = getattr(event, "device_time", None) or getattr(event, "cuda_time", 0) or 0
        calls_us = found.setdefault(event.name, [0, 0.0])
        calls_us[0] += 1
        calls_us[1] += device_us
    return [{"name": name, "calls": calls, "device_us": round(us, 3)}
            for name, (calls, us) in sorted(found.items(), key=lambda kv: -kv[1][1])]


def _cpu_ops(fn, inputs: list) -> list[dict]:
    """Smoke stand-in for the kernel list: the ATen ops one call ran on the CPU."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof, torch.no_grad():
        fn(*inputs)
    found: dict[str, int] = {}
    for event in prof.events():
        if event.name.startswith("aten::"):
            found[event.name] = found.get(event.name, 0) + 1
    return [{"name": name, "calls": calls, "device_us": None} for name, calls in found.items()]


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _versions() -> dict:
    import triton

    return {"kernelgate": __version__, "torch": torch.__version__, "triton": triton.__version__,
            "python": platform.python_version(), "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}


def _shape_text(shape: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in shape.items())


def _progress(e: dict) -> str:
    if "error" in e:
        return f"{e['name']} {e['dtype']}: {e['error']}"
    return (f"{e['name']} {e['dtype']}: {e['t_library_ms']:.4g} ms, floor {e['t_floor_ms']:.4g} ms "
            f"({e['bound']}), U {e['u_library']:.3g}" + (f" [{e['flag']}]" if e["flag"] else ""))


def markdown_table(entries: list[dict]) -> str:
    """One row per (op, dtype): times, floor, U, flag and the top kernels."""
    lines = ["| op | dtype | shape | GFLOP | MB | t_library ms (p20-p80) | t_floor ms | bound | U_library | flag "
             "| kernels |", "|" + " --- |" * 11]
    for e in entries:
        if "error" in e:
            lines.append(f"| {e['name']} | {e['dtype']} | {_shape_text(e['shape'])} | | | | | | | error: "
                         f"{e['error'][:80]} | |")
            continue
        top = ", ".join(k["name"][:60] for k in e["kernels"][:2])
        u = "-" if e["u_library"] is None else f"{e['u_library']:.3f}"
        lines.append(f"| {e['name']} | {e['dtype']} | {_shape_text(e['shape'])} | {e['flops'] / 1e9:.4g} | "
                     f"{e['bytes'] / 1e6:.4g} | {e['t_library_ms']:.4g} ({e['t_library_p20_ms']:.4g}-"
                     f"{e['t_library_p80_ms']:.4g}) | {e['t_floor_ms']:.4g} | {e['bound']} | {u} | "
                     f"{e['flag'] or ''} | {top} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
