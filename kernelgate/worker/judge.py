"""The judge's process: ``python -m kernelgate.worker.judge RESULT_FD WORKDIR``.

It never imports candidate code. It starts the candidate's process at once (both import torch
side by side), builds the problem, and runs the stages (``kernelgate.worker.stages``): every
input, expected output, tolerance, statistic and check lives here.

Order matters: the private result channel is taken and stdout/stderr go to a log file before
anything else is imported. In a ``TurnPool`` (``START_GATE``) it says ``started`` after its
imports and waits for a go-ahead before either process creates a CUDA context. It then says
``ready`` (with the candidate process's pid, so the supervisor can stop or kill both), waits for
one job on stdin, runs it, and exits. The first line on its stdin is the token every record it
sends must carry (the supervisor drops records without it).
"""

from __future__ import annotations

import json
import os
import sys

from kernelgate.worker.protocol import START_GATE

__all__ = ["main", "start_cuda", "exit_with_parent"]


def start_cuda(blocking_sync: bool = False) -> None:
    """Create the CUDA context and run one tiny kernel. The lazy init also fills torch.cuda's state
    (``default_generators``), so a guard armed afterwards does not take that for the candidate's doing.

    ``blocking_sync`` (the candidate's process): a synchronize sleeps instead of spinning, so the
    process's CPU time counts its host work and not its waits for the GPU (the judge reads it)."""
    import torch

    if blocking_sync:
        _blocking_sync()
    torch.cuda.init()
    torch.ones(1, device="cuda").add_(1)
    torch.cuda.synchronize()


def _blocking_sync() -> bool:
    """Set the primary context's flags to CU_CTX_SCHED_BLOCKING_SYNC before it exists (driver API;
    torch's runtime uses that context). False where the driver refused or is missing."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        device = ctypes.c_int()
        return (cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
                and cuda.cuDevicePrimaryCtxSetFlags(device, 0x04) == 0)
    except (OSError, AttributeError):
        return False


def exit_with_parent(parent: int, name: str = "kernelgate-parent-watch", before_exit=None) -> None:
    """Exit when the parent dies (a killed gate, a lost Ray task, a dead judge) instead of running on.

    A thread polls the parent's pid; in the candidate's process it is started before the candidate
    is imported, so the integrity guard counts it among the process's own threads. The judge kills
    its candidate's process first (``before_exit``): stopped between requests, it could not notice.
    """
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        if before_exit is not None:
            before_exit()
        os._exit(70)

    threading.Thread(target=watch, name=name, daemon=True).start()


def main() -> None:
    token = sys.stdin.readline().strip()  # before the candidate's process exists (see Worker)
    result_fd, workdir = int(sys.argv[1]), sys.argv[2]
    channel = os.fdopen(result_fd, "w", buffering=1)
    log_fd = os.open(os.path.join(workdir, "judge.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    parent = os.getppid()
    from pathlib import Path

    from kernelgate.worker import stacks

    stacks.arm(Path(workdir) / stacks.JUDGE_DUMP)  # where it was, if it hangs (the supervisor asks)

    def send(record: dict) -> None:
        channel.write(json.dumps({**record, "token": token}, allow_nan=False) + "\n")
        channel.flush()

    from kernelgate.worker.link import CandidateProcess, Unanswered

    env = {k: v for k, v in os.environ.items() if k != START_GATE}
    candidate = CandidateProcess(Path(workdir), env)  # it imports while this process does
    exit_with_parent(parent, before_exit=candidate.kill)
    import torch

    import kernelgate.worker.stages  # noqa: F401  (numerics, timing, problems ahead of the job)

    if torch.cuda.is_available():
        import torch._inductor.config  # noqa: F401  (use_deterministic_algorithms imports it on first use)
    if os.environ.get(START_GATE) == "1":
        send({"type": "started"})
        sys.stdin.readline()
    if torch.cuda.is_available():
        start_cuda()
    try:
        candidate.start(timeout=600)
    except Unanswered as exc:
        candidate.kill()
        send({"type": "problem_error", "message": f"worker failed to start: {exc.message}"})
        os._exit(0)
    candidate.freeze()
    candidate.refreeze_on_resume()
    send({"type": "ready", "candidate_pid": candidate.pid})

    line = sys.stdin.readline()
    if not line.strip():  # stdin closed before a job came: the supervisor retired this spare
        candidate.kill()
        os._exit(0)
    from kernelgate.errors import ProblemError
    from kernelgate.worker.stages import evaluate
    from kernelgate.worker.supervisor import Job

    job = Job.model_validate_json(line)

    def emit(phase, partial) -> None:
        send({"type": "phase", "phase": phase,
              "measurement": None if partial is None else partial.model_dump(mode="json")})

    try:
        measurement = evaluate(job, Path(workdir), emit, candidate, wait_for_go=sys.stdin.readline)
    except ProblemError as exc:
        if "out of memory" in str(exc).lower() and torch.cuda.is_available():
            # the judge's own memory beside other jobs, not the problem's fault: the pool runs it again alone
            send({"type": "judge_error", "message": f"the judge ran out of GPU memory: {exc}"})
        else:
            send({"type": "problem_error", "message": str(exc)})
    except Exception as exc:  # the judge's own fault: the supervisor raises WorkerError, the candidate is not blamed
        import traceback

        send({"type": "judge_error", "message": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"})
    else:
        send({"type": "result", "measurement": measurement.model_dump(mode="json")})
    finally:
        candidate.kill()
    channel.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
