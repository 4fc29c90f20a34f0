"""Entry point of a worker process: ``python -m kernelgate._child RESULT_FD WORKDIR``.

Order matters: the private result channel is taken and stdout/stderr are sent to a log file
before torch or the candidate is imported, so nothing the candidate prints can reach the parent
as a record. Then torch (and the CUDA context) come up, the process announces itself ready and
waits for one job on stdin. After the job it exits at once: threads the candidate started
cannot keep it alive.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    result_fd, workdir = int(sys.argv[1]), sys.argv[2]
    channel = os.fdopen(result_fd, "w", buffering=1)
    log_fd = os.open(os.path.join(workdir, "candidate.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)

    def send(record: dict) -> None:
        channel.write(json.dumps(record, allow_nan=False) + "\n")
        channel.flush()

    import torch

    if torch.cuda.is_available():
        torch.cuda.init()
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
    import kernelgate.evaluate  # noqa: F401  (imports triton and the plug-ins ahead of the job)
    from kernelgate.dsl import plugins

    plugins()
    send({"type": "ready"})

    line = sys.stdin.readline()
    from pathlib import Path

    from kernelgate.errors import ProblemError
    from kernelgate.evaluate import evaluate
    from kernelgate.worker import Job

    job = Job.model_validate_json(line)

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


if __name__ == "__main__":
    main()
