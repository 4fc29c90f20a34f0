"""Candidates per hour, end to end: a mixed batch screened with ``screen_many``, cold and warm.

On the H200, one call of about 8 minutes (7.5 to 9; give it the 600 s limit), 25 candidates per
row; the ``cold`` row, one candidate in flight, takes about 6 of them (its six CUDA extensions
compile one after another, about 35 s each), so it runs last and the best-settings pair is in
the file first:

    python benchmarks/throughput.py --out $OUT/throughput_h200.json --modes cold-best warm-best cold

    python benchmarks/throughput.py --modes cold warm --only softmax_good --copies 1 --out /tmp/smoke.json  # CPU
    python benchmarks/throughput.py --adaptive --concurrency 12 --compile-cache --out /tmp/repeat.json
    python benchmarks/throughput.py --repeat 3 --resume run1.json --out runs.json   # runs 2 and 3 later

The batch: every case of ``./kg examples`` (with ``--with-corpus``, the study corpus of
``benchmarks/study.py`` too) at its problem's own shape on a GPU (their CPU shapes without one),
``--copies`` times each, shuffled with a fixed seed: Triton, TileLang and CUDA candidates; good,
slow and wrong ones (25 cases).

**Modes** (``--modes``, run in the order given, all on the same batch, in one record):

- ``cold``: every candidate a never-seen source and every compile cache empty, as in a
  generation loop. Each copy of each case is mutated (``benchmarks/mutate.py``: its kernels
  renamed with a suffix unique to the candidate, this invocation and the mode, and the
  ``num_warps`` of its Triton launches halved or doubled in turn), so its source hash, its
  compile-cache keys and its compiled code are its own. The compile cache is on
  (``ScreenOptions.compile_cache``, the library's default), at a new empty directory that also
  holds ``TRITON_CACHE_DIR`` and ``TILELANG_CACHE_DIR``, which are set in this process's
  environment before the lanes start, so every worker inherits them. Settings: the command line's
  ``--concurrency``, ``--adaptive`` and ``--launch-window-ms``, by default the library's
  defaults (one candidate in flight per GPU, 30 timing repetitions).
- ``warm``: the ``cold`` row's sources again, its caches kept: every candidate already compiled.
- ``cold-best``, ``warm-best``: the same at the best settings: ``--best-concurrency`` candidates in
  flight (default 12) and adaptive timing; their own mutation (so nothing from ``cold`` is reused)
  and their own empty cache directory.

A warm mode needs its cold mode earlier in the list. ``--copies`` defaults to 1 with ``--modes``
(25 candidates per row). The cache directories are made under ``--cache-root`` (default a new
temporary directory, removed at the end) and must start empty.

The modes' JSON: ``modes.<mode>`` with ``settings``, ``cache`` (files and bytes under the mode's
cache directory before and after), ``summary`` (``kernelgate.many.summarize``: candidates per
hour, median seconds per stage, counts by status), ``raw_seconds`` (every candidate's total and
per-stage seconds in batch order: the values behind each median) and ``candidates`` (one row per
candidate, with the ``source_sha256`` it was screened as); ``candidates_per_hour`` (mode -> figure,
side by side); ``sources`` (per mutation family, each candidate's hash, renames and retunes) and
``original_sha256`` (per case, the unmutated source's).

Without ``--modes`` (the repeat runs): the unmutated batch (``--copies`` default 4: 100 candidates)
runs ``--repeat`` times; the compile cache is off unless ``--compile-cache``. Its JSON: per run,
``summarize`` plus the GPU's share of the wall time spent timing; per candidate and run, status,
LRE, timing repetitions and seconds per stage; and over the runs, the spread of each candidate's
LRE ((max - min) / median), apart for candidates slower than 50 microseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "examples")]

from _record import run_header  # noqa: E402
from mutate import mutate  # noqa: E402

from kernelgate import Candidate, Problem, ScreenOptions  # noqa: E402
from kernelgate.hardware import detect  # noqa: E402
from kernelgate.many import screen_many, summarize  # noqa: E402

LONG_KERNEL_MS = 0.05
MODES = ("cold", "warm", "cold-best", "warm-best")
BEST_CONCURRENCY = 12
"""Candidates in flight per GPU at the best settings: the figure of ``benchmarks/results/throughput_h200.json``
(2,593 to 2,988 candidates an hour, warm, with adaptive timing)."""


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
    parser.add_argument("--modes", nargs="+", choices=MODES, metavar="MODE",
                        help=f"cold/warm rows on mutated sources, in this order ({', '.join(MODES)}); "
                             "without it: --repeat runs of the unmutated batch")
    parser.add_argument("--copies", type=int, default=None,
                        help="each case this many times in the batch (default 1 with --modes, else 4)")
    parser.add_argument("--with-corpus", action="store_true", help="add the study corpus to the batch")
    parser.add_argument("--repeat", type=int, default=None, help="runs of the same batch (default 3; not with --modes)")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="candidates in flight per GPU (default 1; kernelgate.many.default_concurrency suggests more)")
    parser.add_argument("--adaptive", action="store_true", help="adaptive timing (ScreenOptions.timing_adaptive)")
    parser.add_argument("--launch-window-ms", type=float, default=None,
                        help="ScreenOptions.timing_launch_window_ms (default: ScreenOptions' own)")
    parser.add_argument("--compile-cache", action="store_true",
                        help="reuse compiled code across candidates (without --modes; the modes always use one)")
    parser.add_argument("--best-concurrency", type=int, default=BEST_CONCURRENCY,
                        help=f"candidates in flight per GPU in the -best modes (default {BEST_CONCURRENCY})")
    parser.add_argument("--no-retune", action="store_true", help="mutation renames only (no num_warps change)")
    parser.add_argument("--cache-root", type=Path, default=None,
                        help="where the modes' empty cache directories are made (kept); default a temporary one")
    parser.add_argument("--only", nargs="+", metavar="WORD", help="cases whose name contains one of these words")
    parser.add_argument("--seed", type=int, default=0, help="shuffles the batch")
    parser.add_argument("--resume", type=Path, metavar="JSON",
                        help="add runs to this earlier record of the same batch and options, up to --repeat in all "
                             "(runs may then come from several calls on the machine)")
    args = parser.parse_args(argv)
    if args.modes:
        if args.resume is not None or args.repeat is not None or args.compile_cache:
            parser.error("--resume, --repeat and --compile-cache are for the runs without --modes")
        for mode in args.modes:
            if mode.startswith("warm") and mode.replace("warm", "cold") not in args.modes[:args.modes.index(mode)]:
                parser.error(f"{mode} needs {mode.replace('warm', 'cold')} before it in --modes")
        if len(set(args.modes)) != len(args.modes):
            parser.error("a mode is listed twice")
        return run_modes(args, argv)
    return run_repeats(args, argv)


def run_repeats(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The unmutated batch, ``--repeat`` times (``--resume`` adds runs to an earlier record)."""
    args.copies = 4 if args.copies is None else args.copies
    args.repeat = 3 if args.repeat is None else args.repeat
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
        results, summary = _screen(items, options, args.concurrency, args.out, record, {"run": run})
        rows = [_row(items[r.index][0], r) for r in sorted(results, key=lambda r: r.index)]
        record["runs"].append({"run": run, "summary": summary, "candidates": rows})
        record["lre_spread"] = lre_spread(record["runs"])
        _write(args.out, record)  # each run kept as it ends
        print(f"run {run}: {summary['candidates_per_hour']} candidates/hour, wall {summary['wall_seconds']} s, "
              f"{summary['by_status']}, median stages {summary['median_stage_seconds']}", flush=True)
    print(json.dumps(record["lre_spread"], indent=2))
    lost = [r for run in record["runs"] for r in run["candidates"] if r["status"] is None]
    return 1 if lost else 0


def _screen(items: list, options: ScreenOptions, concurrency: int | None, out: Path, record: dict,
            where: dict) -> tuple[list, dict]:
    """One pass over the batch; the record is rewritten every 10 candidates (a run cut short still
    leaves what it did, under ``partial_run``)."""
    began = time.perf_counter()
    results = []
    for result in screen_many([(item[1], item[2]) for item in items], options=options, concurrency=concurrency):
        results.append(result)
        if len(results) % 10 == 0:
            partial = summarize(results, time.perf_counter() - began)
            _write(out, {**record, "partial_run": {**where, "summary": partial}})
    wall = time.perf_counter() - began
    summary = summarize(results, wall)
    timed = sum(r.stage_seconds.get("timing", 0.0) for r in results)
    summary["gpu_timing_share_of_wall"] = round(timed / wall, 3) if wall else None
    return results, summary


def run_modes(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The cold and warm rows of ``--modes``, one record."""
    copies = 1 if args.copies is None else args.copies
    gpu = detect() is not None
    cases = batch(gpu, args.only, args.with_corpus)
    base = [(name, candidate, problem) for name, candidate, problem in cases for _ in range(copies)]
    random.Random(args.seed).shuffle(base)
    nonce = secrets.token_hex(3)
    families = {"default": "d", "best": "b"}
    needed = sorted({"best" if m.endswith("-best") else "default" for m in args.modes}, key=list(families).index)
    sources: dict[str, list[dict]] = {}
    batches: dict[str, list[tuple]] = {}
    for family in needed:
        batches[family], sources[family] = [], []
        for index, (name, candidate, problem) in enumerate(base):
            tag = f"kg{nonce}{families[family]}{index}"
            warps = None if args.no_retune else ("half" if index % 2 == 0 else "double")
            m = mutate(candidate.source, tag, warps)
            mutated = Candidate(source=m.source, name=f"{name}_{tag}")
            batches[family].append((name, mutated, problem))
            sources[family].append({"index": index, "case": name, "source_sha256": mutated.source_sha256,
                                    "renamed": m.renamed, "retuned": m.retuned})
    settings = {
        "default": {"concurrency": (args.concurrency or 1) if gpu else None, "timing_adaptive": args.adaptive},
        "best": {"concurrency": args.best_concurrency if gpu else None, "timing_adaptive": True},
    }
    window = {} if args.launch_window_ms is None else {"timing_launch_window_ms": args.launch_window_ms}
    root = args.cache_root if args.cache_root is not None else Path(tempfile.mkdtemp(prefix="kg-throughput-"))
    record = {**run_header("python benchmarks/throughput.py", argv),
              "batch": {"distinct_cases": len(cases), "candidates": len(base), "copies": copies,
                        "cases": sorted({name for name, _, _ in base}), "mutation_nonce": nonce,
                        "retune": not args.no_retune},
              "original_sha256": {name: candidate.source_sha256 for name, candidate, _ in cases},
              "sources": sources, "candidates_per_hour": {}, "modes": {}}
    print(f"{'GPU' if gpu else 'no GPU (CPU shapes, nothing timed)'}: {len(base)} candidates per row "
          f"({len(cases)} cases x {copies}), modes {' '.join(args.modes)}", flush=True)
    saved_env = {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "TILELANG_CACHE_DIR")}
    try:
        for mode in args.modes:
            family = "best" if mode.endswith("-best") else "default"
            cache_dir = root / family / "compile"
            if mode.startswith("cold"):
                if _tree_size(root / family)[0]:
                    print(f"{root / family} is not empty: a cold row needs empty caches", file=sys.stderr)
                    return 2
                cache_dir.mkdir(parents=True, exist_ok=True)
            # the workers inherit these (kernelgate.worker.child_environment passes TRITON_*, TILELANG_*);
            # with the compile cache on, the worker points them at the same directories
            os.environ.update(TRITON_CACHE_DIR=str(cache_dir / "triton"), TILELANG_CACHE_DIR=str(cache_dir / "tilelang"))
            options = ScreenOptions(timing_adaptive=settings[family]["timing_adaptive"], compile_cache=True,
                                    compile_cache_dir=str(cache_dir), **window)
            before = _tree_size(root / family)
            items = batches[family]
            results, summary = _screen(items, options, settings[family]["concurrency"], args.out, record,
                                       {"mode": mode})
            after = _tree_size(root / family)
            ordered = sorted(results, key=lambda r: r.index)
            stages = sorted({s for r in ordered for s in r.stage_seconds})
            record["modes"][mode] = {
                "sources": ("never seen: mutated for this row" if mode.startswith("cold")
                            else f"the {mode.replace('warm', 'cold')} row's, already compiled"),
                "settings": {**settings[family], "timing_launch_window_ms": options.timing_launch_window_ms,
                             "compile_cache": True},
                "cache": {"files_before": before[0], "bytes_before": before[1],
                          "files_after": after[0], "bytes_after": after[1]},
                "summary": summary,
                "raw_seconds": {"total": [r.seconds for r in ordered],
                                "stages": {s: [r.stage_seconds.get(s) for r in ordered] for s in stages}},
                "candidates": [{**_row(items[r.index][0], r), "source_sha256": items[r.index][1].source_sha256}
                               for r in ordered],
            }
            record["candidates_per_hour"][mode] = summary["candidates_per_hour"]
            _write(args.out, record)
            print(f"{mode}: {summary['candidates_per_hour']} candidates/hour, wall {summary['wall_seconds']} s, "
                  f"{summary['by_status']}, cache files {before[0]} -> {after[0]}, "
                  f"median stages {summary['median_stage_seconds']}", flush=True)
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if args.cache_root is None:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(record["candidates_per_hour"], indent=2))
    lost = [r for mode in record["modes"].values() for r in mode["candidates"] if r["status"] is None]
    return 1 if lost else 0


def _tree_size(path: Path) -> tuple[int, int]:
    """Files and bytes under ``path`` (0, 0 where it does not exist)."""
    files = size = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            try:
                size += os.lstat(os.path.join(dirpath, name)).st_size
                files += 1
            except OSError:
                pass
    return files, size


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
