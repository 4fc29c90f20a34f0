"""Candidates per hour, end to end: a mixed batch screened with ``screen_many``, the same batch several times.

    python benchmarks/throughput.py --out benchmarks/results/throughput_h200.json
    python benchmarks/throughput.py --concurrency 1 --repeat 1 --out /tmp/one_at_a_time.json
    python benchmarks/throughput.py --adaptive --out /tmp/adaptive.json     # adaptive timing
    python benchmarks/throughput.py --only rowsum --copies 1 --repeat 1 --out /tmp/smoke.json   # CPU
    python benchmarks/throughput.py --repeat 3 --resume run1.json --out runs.json   # runs 2 and 3 later

The batch: every case of ``./kg examples`` (with ``--with-corpus``, the study corpus of
``benchmarks/study.py`` too) at its problem's own shape on a GPU (their CPU shapes without one),
``--copies`` times each, shuffled with a fixed seed: Triton, TileLang and CUDA candidates; good,
slow and wrong ones (25 cases x 4 copies = 100 candidates by default). The compile
cache is off unless ``--compile-cache``: every candidate compiles from scratch in its own worker,
as a batch of new sources would. The same batch runs ``--repeat`` times.

The JSON: per run, ``summarize`` (candidates per hour, median seconds per stage, counts by
status) plus the GPU's share of the wall time spent timing; per candidate and run, status, LRE,
timing repetitions and seconds per stage; and over the runs, the spread of each candidate's LRE
((max - min) / median), apart for candidates slower than 50 microseconds.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "examples")]

from _record import run_header  # noqa: E402

from kernelgate import Candidate, Problem, ScreenOptions  # noqa: E402
from kernelgate.hardware import detect  # noqa: E402
from kernelgate.many import screen_many, summarize  # noqa: E402

LONG_KERNEL_MS = 0.05


def batch(gpu: bool, only: list[str] | None, corpus: bool) -> list[tuple[str, Candidate, Problem]]:
    """(case name, candidate, problem) for every example (and study) case."""
    from screen_examples import CASES
    from study import CORPUS

    examples = HERE.parent / "examples"
    wanted = (lambda name: not only or any(word in name for word in only))
    items = []
    for case in (c for c in CASES if wanted(c.name)):
        items.append((case.name, Candidate(source=(examples / case.candidate).read_text(), name=case.name),
                      case.problem_spec(gpu)))
    for case in (c for c in CORPUS if corpus and wanted(c.name)):
        items.append((case.name, Candidate(source=(examples / case.kernel).read_text(), name=case.name),
                      case.problem(gpu)))
    seen, unique = set(), []
    for name, candidate, problem in items:  # a kernel in both lists is screened once per copy
        key = (candidate.source_sha256, problem.model_dump_json())
        if key not in seen:
            seen.add(key)
            unique.append((name, candidate, problem))
    return unique


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--copies", type=int, default=4, help="each case this many times in the batch (default 4)")
    parser.add_argument("--with-corpus", action="store_true", help="add the study corpus to the batch")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the same batch (default 3)")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="candidates in flight per GPU (default 1; kernelgate.many.default_concurrency suggests more)")
    parser.add_argument("--adaptive", action="store_true", help="adaptive timing (ScreenOptions.timing_adaptive)")
    parser.add_argument("--launch-window-ms", type=float, default=None,
                        help="ScreenOptions.timing_launch_window_ms (default: ScreenOptions' own)")
    parser.add_argument("--compile-cache", action="store_true", help="reuse compiled code across candidates")
    parser.add_argument("--only", nargs="+", metavar="WORD", help="cases whose name contains one of these words")
    parser.add_argument("--seed", type=int, default=0, help="shuffles the batch")
    parser.add_argument("--resume", type=Path, metavar="JSON",
                        help="add runs to this earlier record of the same batch and options, up to --repeat in all "
                             "(runs may then come from several calls on the machine)")
    args = parser.parse_args(argv)

    gpu = detect() is not None
    cases = batch(gpu, args.only, args.with_corpus)
    items = [(name, candidate, problem) for name, candidate, problem in cases for _ in range(args.copies)]
    random.Random(args.seed).shuffle(items)
    options = ScreenOptions(timing_adaptive=args.adaptive, compile_cache=args.compile_cache,
                            **({} if args.launch_window_ms is None else {"timing_launch_window_ms": args.launch_window_ms}))
    record = {**run_header("python benchmarks/throughput.py", argv),
              "batch": {"distinct_cases": len(cases), "candidates": len(items), "copies": args.copies,
                        "cases": sorted({name for name, _, _ in items})},
              "options": {"concurrency": (args.concurrency or 1) if gpu else None,
                          "timing_adaptive": args.adaptive,
                          "timing_launch_window_ms": options.timing_launch_window_ms,
                          "compile_cache": args.compile_cache},
              "runs": []}
    if args.resume is not None:
        earlier = json.loads(args.resume.read_text())
        if earlier["batch"] != record["batch"] or earlier["options"] != record["options"]:
            print(f"{args.resume}: another batch or other options; not resumed", file=sys.stderr)
            return 2
        record["runs"] = earlier["runs"]
        record["earlier_commands"] = earlier.get("earlier_commands", []) + [
            {k: earlier[k] for k in ("command", "date", "device", "versions")}]
    print(f"{'GPU' if gpu else 'no GPU (CPU shapes, nothing timed)'}: {len(items)} candidates "
          f"({len(cases)} cases x {args.copies}), {args.repeat - len(record['runs'])} run(s)", flush=True)
    for run in range(len(record["runs"]), args.repeat):
        began = time.perf_counter()
        results = []
        for result in screen_many([(c, p) for _, c, p in items], options=options, concurrency=args.concurrency):
            results.append(result)
            if len(results) % 10 == 0:  # a run cut short still leaves what it did
                partial = summarize(results, time.perf_counter() - began)
                _write(args.out, {**record, "partial_run": {"run": run, "summary": partial}})
        wall = time.perf_counter() - began
        summary = summarize(results, wall)
        timed = sum(r.stage_seconds.get("timing", 0.0) for r in results)
        summary["gpu_timing_share_of_wall"] = round(timed / wall, 3) if wall else None
        rows = [_row(items[r.index][0], r) for r in sorted(results, key=lambda r: r.index)]
        record["runs"].append({"run": run, "summary": summary, "candidates": rows})
        record["lre_spread"] = lre_spread(record["runs"])
        _write(args.out, record)  # each run kept as it ends
        print(f"run {run}: {summary['candidates_per_hour']} candidates/hour, wall {summary['wall_seconds']} s, "
              f"{summary['by_status']}, median stages {summary['median_stage_seconds']}", flush=True)
    print(json.dumps(record["lre_spread"], indent=2))
    lost = [r for run in record["runs"] for r in run["candidates"] if r["status"] is None]
    return 1 if lost else 0


def _write(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")


def _row(name: str, r) -> dict:
    v, m = r.verdict, (r.verdict.metrics if r.verdict is not None else None)
    return {"index": r.index, "case": name, "status": v.status.value if v else None,
            "reason": v.reason.value if v and v.reason else None, "error": r.error, "lane": r.lane,
            "dsl": v.dsl if v else None, "lre": m.lre if m else None,
            "t_candidate_ms": m.t_candidate_ms if m else None, "t_library_ms": m.t_library_ms if m else None,
            "host_candidate_ms": v.timing.candidate.host_median_ms if v and v.timing else None,
            "timing_reps": v.timing.candidate.reps if v and v.timing else None,
            "timing_stopped": v.timing.stopped if v and v.timing else None,
            "launch_window_ms": v.timing.launch_window_ms if v and v.timing else None,
            "host_late_reps": v.timing.candidate.host_late_reps if v and v.timing else None,
            "seconds": r.seconds, "stage_seconds": r.stage_seconds}


def lre_spread(runs: list[dict]) -> dict:
    """Per candidate index, (max - min) / median of its LRE over the runs; summarized for long and short kernels."""
    by_index: dict[int, list[tuple[float, float]]] = {}
    for run in runs:
        for row in run["candidates"]:
            if row["lre"] is not None:
                by_index.setdefault(row["index"], []).append((row["lre"], row["t_candidate_ms"]))
    spreads = {"long": [], "short": []}
    for values in by_index.values():
        if len(values) < 2:
            continue
        lres = [lre for lre, _ in values]
        kind = "long" if statistics.median(t for _, t in values) > LONG_KERNEL_MS else "short"
        spreads[kind].append((max(lres) - min(lres)) / statistics.median(lres))
    out = {"runs": len(runs), "threshold_ms": LONG_KERNEL_MS}
    for kind, values in spreads.items():
        values.sort()
        out[kind] = {"candidates": len(values),
                     "median": round(statistics.median(values), 4) if values else None,
                     "p90": round(values[int(0.9 * (len(values) - 1))], 4) if values else None,
                     "max": round(values[-1], 4) if values else None,
                     "under_3_percent": sum(v < 0.03 for v in values)}
    return out


if __name__ == "__main__":
    sys.exit(main())
