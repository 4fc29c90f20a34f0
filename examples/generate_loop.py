"""A generation loop: generate, screen, feed back, keep the best.

    python examples/generate_loop.py --base-url http://127.0.0.1:8000/v1 --model MODEL \
        --problem examples/kernelbench/KernelBench/level1/1_Sum_over_last_dim.py --rounds 4

Each round asks an OpenAI-compatible endpoint (vLLM, SGLang, a hosted API) for a ``ModelNew``,
screens the reply's code with kernelgate, and logs the verdict. The next prompt carries the
feedback of the last verdicts of this problem from the log. The loop stops at the first ``accept``
or after ``--rounds``; the best candidate so far (``kernelgate.rank``) is written to ``--out``.
An API key, if the endpoint needs one, is read from the environment variable named by
``--api-key-env`` (default ``OPENAI_API_KEY``).

Exit status: 0 when some candidate was not rejected, 1 when every one was, 2 for a usage error,
3 when the endpoint gave no completion.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path

from kernelgate import Candidate, ScreenOptions, Status, screen
from kernelgate.adapters.kernelbench import dsl_for_backend, problem as kernelbench_problem
from kernelgate.adapters.openai_compat import ChatClient, GeneratorError, build_prompt, extract_code
from kernelgate.errors import KernelgateError
from kernelgate.rank import rank
from kernelgate.store import VerdictLog


def _shape(items: list[str]) -> dict[str, int]:
    shape = {}
    for item in items:
        key, _, value = item.partition("=")
        shape[key] = int(value)
    return shape


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", required=True, help="the endpoint's base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True)
    p.add_argument("--problem", required=True, help="a KernelBench-style problem file")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--backend", default="triton", choices=["triton", "cuda", "tilelang"])
    p.add_argument("--shape", action="append", default=[], metavar="NAME=INT", help="override an integer global")
    p.add_argument("--log", default="kernelgate.sqlite", help="the verdict log")
    p.add_argument("--batch", default=None, help="batch name in the log (default: loop-<random>)")
    p.add_argument("--feedback", type=int, default=3, help="feedback texts of earlier verdicts per prompt")
    p.add_argument("--out", default="best_kernel.py", help="where the best candidate's source goes")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--api-key-env", default="OPENAI_API_KEY")
    args = p.parse_args(argv)

    try:
        problem = kernelbench_problem(args.problem, shape=_shape(args.shape))
    except (KernelgateError, ValueError) as exc:
        print(f"generate_loop: {exc}", file=sys.stderr)
        return 2
    problem_source = Path(args.problem).read_text()
    batch = args.batch or f"loop-{uuid.uuid4().hex[:8]}"
    with VerdictLog(args.log) as log, ChatClient(args.base_url, args.model, api_key=os.environ.get(args.api_key_env),
                                                 timeout_s=args.timeout, temperature=args.temperature) as client:
        for round_no in range(1, args.rounds + 1):
            messages = build_prompt(problem_source, log.last_feedback(problem, args.feedback), backend=args.backend)
            try:
                completion = client.complete(messages)
            except GeneratorError as exc:
                print(f"generate_loop: {exc}", file=sys.stderr)
                return 3
            source = extract_code(completion.text)
            candidate = Candidate(source=source, dsl=dsl_for_backend(args.backend), name=f"{batch}-round{round_no}",
                                  metadata={"round": round_no, "model": completion.model})
            verdict = screen(candidate, problem, options=ScreenOptions())
            log.add(verdict, batch=batch, generator={**completion.metadata(), "round": round_no}, source=source)
            print(f"round {round_no}: {verdict.summary}", flush=True)
            if verdict.status is Status.accept:
                break
        entries = log.entries(batch=batch)
    best = rank([e.verdict for e in entries])[0]
    if best.status is Status.reject:
        print(f"every candidate of batch {batch} was rejected; last feedback:\n{best.feedback}")
        return 1
    source = next(e.source for e in entries if e.verdict.candidate_sha256 == best.candidate_sha256 and e.source)
    Path(args.out).write_text(source)
    print(f"best: {best.summary}\nwritten to {args.out}; batch {batch} in {args.log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
