"""Where one screen's seconds go: cProfile of an in-process ``evaluate`` of example cases (investigation, not the gate).

    OUT=/tmp/prof python3 benchmarks/probes/profile_screen.py rowsum_good [CASE ...]

Runs the worker's stages in this process (no worker, no turns) with adaptive timing, prints the
stage seconds and writes ``$OUT/profile_CASE.txt`` (the 60 most expensive calls, cumulative).
The first screen in a process also pays its imports; a worker has most of them done before its job.
"""
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "examples")]

from screen_examples import CASES  # noqa: E402

from kernelgate import Candidate, ScreenOptions  # noqa: E402
from kernelgate.dsl import detect_dsl  # noqa: E402
from kernelgate.worker.link import CandidateProcess  # noqa: E402
from kernelgate.worker.stages import evaluate  # noqa: E402
from kernelgate.worker import Job  # noqa: E402

out = Path(os.environ.get("OUT", "."))
gpu = __import__("torch").cuda.is_available()
for name in sys.argv[1:]:
    case = next(c for c in CASES if c.name == name)
    source = (ROOT / "examples" / case.candidate).read_text()
    job = Job(candidate=Candidate(source=source, name=name, dsl=detect_dsl(source)), problem=case.problem_spec(gpu),
              options=ScreenOptions(timing_adaptive=True))
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory() as workdir:
        began = time.perf_counter()
        profile.enable()
        link = CandidateProcess(Path(workdir), dict(os.environ))
        link.start(600)
        m = evaluate(job, Path(workdir), lambda phase, partial: None, link)
        profile.disable()
        wall = time.perf_counter() - began
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(60)
    (out / f"profile_{name}.txt").write_text(f"wall {wall:.2f} s; stages {m.stage_seconds}; failure {m.failure}\n"
                                            + text.getvalue())
    print(name, f"wall {wall:.2f} s", m.stage_seconds, m.failure)
