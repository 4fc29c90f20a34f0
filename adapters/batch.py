"""Screen a folder of generations laid out as KernelBench's runs are.

KernelBench's generation scripts write ``runs/<run_name>/level_<l>_problem_<id>_sample_<s>_kernel.py``
(and ``..._prompt.txt`` beside it). ``screen_runs`` screens every kernel file of one level against
its problem in a KernelBench checkout, logs each verdict, and shows progress on stderr::

    from kernelgate.adapters.batch import screen_runs
    result = screen_runs("KernelBench", level=1, runs="runs/my_run", log=VerdictLog("kg.sqlite"))
    result.items[0].verdict.status

``kernelbench_eval_results`` turns the result into the shape of KernelBench's
``runs/<run_name>/eval_results.json`` (problem id -> list of samples), so its analysis scripts read it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kernelgate.adapters.kernelbench import GENERATION_RE, problem, problem_files, read_candidate, result_from_verdict
from kernelgate.errors import ProblemError
from kernelgate.models import Verdict

__all__ = ["Generation", "BatchItem", "BatchResult", "find_generations", "screen_runs", "kernelbench_eval_results"]


@dataclass(frozen=True)
class Generation:
    """One generated kernel file of a run."""

    level: int
    problem_id: int
    sample_id: int
    path: Path


@dataclass
class BatchItem:
    generation: Generation
    verdict: Verdict
    log_id: int | None = None
    """The row id in the verdict log, when one was given."""


@dataclass
class BatchResult:
    batch: str
    items: list[BatchItem] = field(default_factory=list)
    skipped: list[tuple[Generation, str]] = field(default_factory=list)
    """Generations not screened, with why (no such problem in the checkout, a broken problem file)."""
    logged: list[BatchItem] = field(default_factory=list)
    """Generations not screened again because the log already holds a verdict for the same source
    (sha256) and problem: each with that earlier verdict and its row id. Not in ``items``."""

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for item in self.items:
            found[item.verdict.status.value] = found.get(item.verdict.status.value, 0) + 1
        return found


def find_generations(runs: str | Path, level: int | None = None) -> list[Generation]:
    """The kernel files of a run folder, by problem id then sample id; other files are ignored."""
    folder = Path(runs)
    if not folder.is_dir():
        raise ProblemError(f"runs folder not found: {folder}")
    found = []
    for path in folder.iterdir():
        match = GENERATION_RE.match(path.name)
        if match and path.is_file():
            gen = Generation(int(match.group(1)), int(match.group(2)), int(match.group(3)), path)
            if level is None or gen.level == level:
                found.append(gen)
    return sorted(found, key=lambda g: (g.level, g.problem_id, g.sample_id))


class _Progress:
    """tqdm when it is installed and stderr is a terminal; otherwise one plain line per item."""

    def __init__(self, total: int, stream: IO[str] | None) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self._bar = None
        if stream is not None and getattr(stream, "isatty", lambda: False)():
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, file=stream, unit="kernel")
            except ImportError:
                pass

    def step(self, text: str) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.set_postfix_str(text[:60])
            self._bar.update(1)
        elif self.stream is not None:
            print(f"[{self.done}/{self.total}] {text}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def screen_runs(checkout: str | Path, level: int, runs: str | Path, *, log: Any = None, batch: str | None = None,
                backend: str | None = None, dtype: str | None = None, problem_ids: list[int] | None = None,
                options: Any = None, policy: Any = None, runner: Any = None,
                progress: IO[str] | None | str = "stderr", rescreen: bool = False) -> BatchResult:
    """Screen every generation of ``level`` in ``runs`` against its problem in ``checkout``.

    ``log``: a ``VerdictLog`` that gets every verdict (batch name: ``batch``, default the run
    folder's name). ``backend``: KernelBench's backend name for every file, or None to detect each.
    ``problem_ids``: only these problems. ``progress``: a stream, None for silence, or ``"stderr"``
    (the default) for whatever ``sys.stderr`` is when the call is made. A generation whose problem is missing or broken is
    skipped and listed in ``BatchResult.skipped``; a bad kernel is a verdict, never an exception.
    A generation whose source (sha256) and problem already have a verdict in ``log`` is not
    screened or logged again (so a second run over the same folder adds nothing): it goes to
    ``BatchResult.logged`` with the earlier verdict, unless ``rescreen`` is set.
    """
    from kernelgate.gate import screen
    from kernelgate.policy import DEFAULT_POLICY

    runs = Path(runs)
    batch = batch or runs.resolve().name
    files = problem_files(checkout, level)
    generations = [g for g in find_generations(runs, level) if problem_ids is None or g.problem_id in problem_ids]
    result = BatchResult(batch=batch)
    bar = _Progress(len(generations), sys.stderr if progress == "stderr" else progress)  # the stream of now
    try:
        for gen in generations:
            label = gen.path.name
            if gen.problem_id not in files:
                result.skipped.append((gen, f"no problem {gen.problem_id} in level {level} of the checkout"))
                bar.step(f"{label}: skipped (no such problem)")
                continue
            meta = {"kernelbench_level": gen.level, "kernelbench_problem_id": gen.problem_id,
                    "kernelbench_sample_id": gen.sample_id, "kernelbench_problem": files[gen.problem_id].name}
            candidate = read_candidate(gen.path, backend=backend, metadata=meta)
            spec = problem(files[gen.problem_id], dtype=dtype)
            if log is not None and not rescreen:
                earlier = log.entries(problem=spec, sha256=candidate.source_sha256)
                if earlier:
                    result.logged.append(BatchItem(generation=gen, verdict=earlier[-1].verdict,
                                                   log_id=earlier[-1].id))
                    bar.step(f"{label}: already in the log (row {earlier[-1].id}: "
                             f"{earlier[-1].verdict.status.value}), not screened again")
                    continue
            started = time.perf_counter()
            try:
                verdict = screen(candidate, spec, policy=policy or DEFAULT_POLICY, options=options, runner=runner)
            except ProblemError as exc:
                result.skipped.append((gen, str(exc)))
                bar.step(f"{label}: skipped ({exc})")
                continue
            item = BatchItem(generation=gen, verdict=verdict)
            if log is not None:
                item.log_id = log.add(verdict, batch=batch, generator={"source": "kernelbench_runs",
                                                                       "run": runs.resolve().name,
                                                                       "file": str(gen.path.resolve())})
            result.items.append(item)
            reason = f" ({verdict.reason.value})" if verdict.reason else ""
            bar.step(f"{label}: {verdict.status.value}{reason} in {time.perf_counter() - started:.1f} s")
    finally:
        bar.close()
    return result


def kernelbench_eval_results(result: BatchResult) -> dict[str, list[dict]]:
    """KernelBench's ``eval_results.json`` layout: problem id -> samples with its result fields.

    The verdicts of this run and those found already in the log (``result.logged``) alike."""
    out: dict[str, list[dict]] = {}
    for item in sorted(result.items + result.logged, key=lambda i: (i.generation.problem_id, i.generation.sample_id)):
        r = result_from_verdict(item.verdict)
        out.setdefault(str(item.generation.problem_id), []).append({
            "sample_id": item.generation.sample_id, "compiled": r.compiled, "correctness": r.correctness,
            "metadata": r.metadata, "runtime": r.runtime, "runtime_stats": r.runtime_stats,
            "ref_runtime": r.ref_runtime, "kernelgate_status": item.verdict.status.value,
            "kernelgate_reason": item.verdict.reason.value if item.verdict.reason else None,
        })
    return out
