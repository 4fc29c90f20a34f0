"""Screen many candidates on a Ray cluster: the same ``ScreenResult`` stream as ``screen_many``.

    from kernelgate.ray_pool import screen_many_ray      # pip install 'kernelgate[ray]'
    for result in screen_many_ray(items, problem, address="auto"):
        result.index, result.lane, result.verdict.status  # in the order they finish

Each candidate is one Ray task. The task runs the ordinary ``screen()`` on whichever node Ray
picks, and ``screen`` starts its own isolated worker process there, as it does locally: a
candidate that crashes, hangs or exhausts memory is a ``reject`` from that worker and never takes
the Ray task down. Results come back with ``ray.wait`` as they finish; each index exactly once.

On GPUs (documented, not run in CI: Ray's wheel is too large for the lent H200's bundle). When
the cluster has GPUs, each task asks for ``num_gpus=1`` and ``num_cpus=1``. Ray then sets
``CUDA_VISIBLE_DEVICES`` in the task's process to the one GPU it holds. The kernelgate worker
inherits it (``child_environment`` passes ``CUDA_*``), so the candidate sees and is timed on that
GPU only. Ray gives that GPU to no other task until this one ends, so one candidate is timed per
GPU at a time, as with a ``screen_many`` lane. Without GPUs a task asks for one CPU, and nothing
is timed (``untimed`` verdicts, as on any CPU machine).

Every node needs kernelgate, torch and the DSLs, in the versions the driver has. A
``Problem.file`` path must exist on the nodes (a shared file system), while catalogue ops
(``Problem.op``) need nothing. The compile cache is per node. Leave ``options`` as None to have
each task build ``ScreenOptions()`` on its node, so that its cache directory is the node's own; an
options object built here carries this machine's ``compile_cache_dir`` to every node. Each task
starts a fresh worker, with no spare started ahead, because Ray may hand the same process another
GPU for its next task. So each candidate pays the worker's start-up (torch import, CUDA context),
which a local ``screen_many`` lane hides behind the previous candidate.

Failures, kept apart as in ``screen_many``:

- the candidate's own crash, hang or bad numerics: a ``reject`` verdict;
- a kernelgate worker that cannot start (``WorkerError``): retried once inside the task, then
  ``error``;
- the Ray task itself dying (its worker process or node lost, an object lost, a Ray error):
  Ray's own retries are off (``max_retries=0``); the driver resubmits the task once, and a second
  failure is reported as ``error``. ``attempts`` counts both kinds.

Stopping the iteration early cancels the tasks still pending or running. A Ray instance this call
starts (when none is initialized) stays up for later calls; ``ray.shutdown()`` ends it.
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable, Iterator

from kernelgate.errors import KernelgateError
from kernelgate.many import ScreenResult, _work_items
from kernelgate.models import Candidate, Problem, Verdict
from kernelgate.policy import DEFAULT_POLICY, Policy
from kernelgate.worker import Job, ScreenOptions, Worker, WorkerResult

__all__ = ["screen_many_ray", "RayUnavailableError"]


class RayUnavailableError(KernelgateError):
    """Ray is needed for ``screen_many_ray`` and cannot be imported."""


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(
            "screen_many_ray needs Ray, which is not installed here: pip install 'kernelgate[ray]' "
            f"(or pip install ray), or use kernelgate.screen_many on this machine's GPUs ({exc})") from exc
    return ray


class _OwnWorkers:
    """The runner of one Ray task: a fresh kernelgate worker per job, never left behind.

    The worker starts from this process's environment, which holds the GPU Ray gave the task.
    Ray cancels a running task by raising ``KeyboardInterrupt`` in it (the supervisor's loop
    wakes every 0.25 s, so it lands promptly); the worker is then killed, so that no orphan keeps
    running a candidate or holding the GPU.
    """

    def run(self, job: Job) -> WorkerResult:
        worker = Worker()
        try:
            return worker.run(job)
        except BaseException:
            if worker.proc.returncode is None:  # not reaped yet: still ours to kill
                worker.close()
            raise


def _screen_task(candidate_json: str, problem_json: str | None, policy_json: str, options_json: str | None,
                 gpu: bool) -> dict[str, Any]:
    """One candidate, on a Ray worker: ``screen`` on a fresh private kernelgate worker.

    Arguments and result are JSON text and plain data, so that the driver validates what comes
    back. Never raises for a candidate's or the gate's fault (those are the verdict or ``error``).
    """
    import ray

    from kernelgate.many import _screen_with_retry

    began = time.perf_counter()
    candidate = Candidate.model_validate_json(candidate_json)
    problem = Problem.model_validate_json(problem_json) if problem_json is not None else None
    policy = Policy.model_validate_json(policy_json)
    options = ScreenOptions.model_validate_json(options_json) if options_json is not None else ScreenOptions()
    node = ray.util.get_node_ip_address()
    lane = f"ray:{node}/cuda:{os.environ.get('CUDA_VISIBLE_DEVICES', '?')}" if gpu else f"ray:{node}/cpu"
    verdict, error, attempts = _screen_with_retry(candidate, problem, policy, options, _OwnWorkers())
    return {"verdict": verdict.model_dump_json() if verdict is not None else None, "error": error, "lane": lane,
            "attempts": attempts, "seconds": round(time.perf_counter() - began, 3)}


def _result(index: int, out: Any, ray_attempt: int, finished_at_s: float) -> ScreenResult:
    """Check a task's plain-data answer and make it a ``ScreenResult``."""
    try:
        verdict = Verdict.model_validate_json(out["verdict"]) if out["verdict"] is not None else None
        return ScreenResult(index=index, verdict=verdict, error=out["error"], lane=str(out["lane"]),
                            attempts=ray_attempt - 1 + int(out["attempts"]), seconds=float(out["seconds"]),
                            stage_seconds=dict(verdict.seconds) if verdict is not None else {},
                            finished_at_s=finished_at_s)
    except Exception as exc:  # a malformed answer is the gate's fault: report it, do not lose the candidate
        return ScreenResult(index=index, verdict=None, error=f"internal fault: bad task result: {exc}", lane="ray",
                            attempts=ray_attempt, finished_at_s=finished_at_s)


def screen_many_ray(items: Iterable[Candidate | tuple[Candidate, Problem]], problem: Problem | None = None, *,
                    policy: Policy = DEFAULT_POLICY, options: ScreenOptions | None = None,
                    num_gpus_per_task: float | None = None, address: str | None = None) -> Iterator[ScreenResult]:
    """Screen every candidate as a Ray task; yield a ``ScreenResult`` as each one finishes.

    ``items`` and ``problem``: as for ``screen_many``. ``num_gpus_per_task``: None takes 1 when
    the cluster has GPUs, else 0. Below 1, tasks share a GPU and time each other's noise; a
    request for GPUs the cluster lacks waits until the autoscaler adds some. ``address``: the
    cluster for ``ray.init`` when Ray is not initialized yet (None starts a local one, ``"auto"``
    joins the running cluster), while an initialized Ray is used as it is. ``options``: None
    builds ``ScreenOptions()`` on each node (see the module docstring).

    Raises ``RayUnavailableError`` (a ``KernelgateError``) at once when Ray cannot be imported.
    """
    ray = _import_ray()
    if num_gpus_per_task is not None and num_gpus_per_task < 0:
        raise ValueError("num_gpus_per_task must be >= 0")
    return _stream(ray, _work_items(items, problem), policy, options, num_gpus_per_task, address)


def _stream(ray, work: list, policy: Policy, options: ScreenOptions | None, num_gpus: float | None,
            address: str | None) -> Iterator[ScreenResult]:
    if not work:
        return
    if not ray.is_initialized():
        ray.init(address=address)
    if num_gpus is None:
        num_gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    task = ray.remote(_screen_task).options(num_gpus=num_gpus, num_cpus=1, max_retries=0, retry_exceptions=False)
    policy_json = policy.model_dump_json()
    options_json = options.model_dump_json() if options is not None else None
    began = time.perf_counter()

    def submit(candidate: Candidate, spec: Problem | None):
        return task.remote(candidate.model_dump_json(), spec.model_dump_json() if spec is not None else None,
                           policy_json, options_json, num_gpus > 0)

    pending = {submit(candidate, spec): (index, candidate, spec, 1) for index, candidate, spec in work}
    try:
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            index, candidate, spec, attempt = pending.pop(ref)
            try:
                out = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the task died (worker or node lost), not the candidate
                if attempt < 2:
                    pending[submit(candidate, spec)] = (index, candidate, spec, attempt + 1)
                    continue
                first_line = (str(exc).strip().splitlines() or [""])[0][:300]
                yield ScreenResult(index=index, verdict=None, lane="ray", attempts=attempt,
                                   error=f"ray task failed twice: {type(exc).__name__}: {first_line}",
                                   finished_at_s=round(time.perf_counter() - began, 3))
                continue
            yield _result(index, out, attempt, round(time.perf_counter() - began, 3))
    finally:
        if pending and ray.is_initialized():  # stopped early: the rest is not wanted
            for ref in pending:
                ray.cancel(ref)
