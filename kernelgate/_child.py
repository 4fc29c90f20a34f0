"""Entry point of a worker process: ``python -m kernelgate._child RESULT_FD WORKDIR``.

Order matters: the private result channel is taken and stdout/stderr are sent to a log file
before torch or the candidate is imported, so nothing the candidate prints can reach the parent
as a record. Then torch, triton and the plug-ins are imported, the CUDA context comes up (in a
``TurnPool``, only after a go-ahead: ``START_GATE``), the process announces itself ready and
waits for one job on stdin, sets that job's limits (``_limit``) and runs it. After the job it
exits at once: threads the candidate started cannot keep it alive.
"""

from __future__ import annotations

import json
import os
import sys

START_GATE = "KERNELGATE_START_GATE"
"""Set to 1 by a ``TurnPool``: after its imports (CPU work) the child says ``started`` and waits for
a go-ahead before creating its CUDA context."""


def start_cuda() -> None:
    """Create the CUDA context and run one tiny kernel. The lazy init also fills torch.cuda's state
    (``default_generators``), so a guard armed afterwards does not take that for the candidate's doing."""
    import torch

    torch.cuda.init()
    torch.ones(1, device="cuda").add_(1)
    torch.cuda.synchronize()


def main() -> None:
    result_fd, workdir = int(sys.argv[1]), sys.argv[2]
    channel = os.fdopen(result_fd, "w", buffering=1)
    log_fd = os.open(os.path.join(workdir, "candidate.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)

    _exit_with_parent(os.getppid())

    def send(record: dict) -> None:
        channel.write(json.dumps(record, allow_nan=False) + "\n")
        channel.flush()

    import torch

    import kernelgate.evaluate  # noqa: F401  (imports triton and the plug-ins ahead of the job)
    from kernelgate.dsl import plugins

    plugins()
    if torch.cuda.is_available():
        # torch.use_deterministic_algorithms, which numerics call, imports torch._inductor (and
        # dynamo) on first use: about 1.2 s on the H200, better spent while the worker starts than
        # in a GPU turn
        import torch._inductor.config  # noqa: F401
    if os.environ.get(START_GATE) == "1":  # a TurnPool's worker: the GPU only in a turn
        send({"type": "started"})
        sys.stdin.readline()
    if torch.cuda.is_available():
        start_cuda()
    send({"type": "ready"})

    line = sys.stdin.readline()
    from pathlib import Path

    from kernelgate.errors import ProblemError
    from kernelgate.evaluate import evaluate
    from kernelgate.worker import Job

    job = Job.model_validate_json(line)
    _limit(job.options, torch)

    def emit(phase, partial) -> None:
        send({"type": "phase", "phase": phase,
              "measurement": None if partial is None else partial.model_dump(mode="json")})

    try:
        measurement = evaluate(job, Path(workdir), emit, wait_for_go=sys.stdin.readline)
    except ProblemError as exc:
        send({"type": "problem_error", "message": str(exc)})
    else:
        send({"type": "result", "measurement": measurement.model_dump(mode="json")})
    channel.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent died (a killed gate, a lost Ray task) exits instead of running on.

    A thread polls the parent's pid; it is started before the candidate is imported, so the
    integrity guard counts it among the worker's own threads.
    """
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(70)

    threading.Thread(target=watch, name="kernelgate-parent-watch", daemon=True).start()


def _limit(opts, torch) -> None:
    """Per-job limits, set before the candidate is imported (the spare started before its job was known).

    Files: ``RLIMIT_FSIZE``, with SIGXFSZ ignored so that a write past it fails with an error the
    candidate sees (a flood of output ends as an exception, not a dead worker). Host memory:
    ``RLIMIT_DATA`` where no GPU is visible; with a GPU only the parent's watchdog on the resident
    size applies (the CUDA driver maps large regions that address-space limits would refuse).
    GPU memory: the caching allocator's share of the device.
    """
    import resource
    import signal

    from kernelgate.worker import default_host_memory_mb

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    size = opts.max_file_mb << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    if torch.cuda.is_available():
        torch.cuda.set_per_process_memory_fraction(opts.gpu_memory_fraction)
    else:
        data = (opts.host_memory_mb or default_host_memory_mb()) << 20
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard == resource.RLIM_INFINITY or data < hard:
            resource.setrlimit(resource.RLIMIT_DATA, (data, data if hard == resource.RLIM_INFINITY else hard))


if __name__ == "__main__":
    main()
