"""Workers: where a screen runs, and the trust boundary inside it.

    parent (``supervisor``: no torch)      judge process (``judge``, ``stages``)      candidate's process (``candidate``)
      Job ──────────────────────────────>  problem, inputs, reference, checks,  <──>  loads and runs the candidate only;
      Measurement <──────────────────────  timing statistics, deadlines              outputs and raw timings back
                                           (``protocol``: JSON lines, shared tensors; ``link``: requests, deadlines)

The judge never imports candidate code and never unpickles what the candidate's process sends.
"""

from kernelgate.worker.supervisor import (GATED_PHASES, Job, ScreenOptions, TurnPool, Worker, WorkerPool,
                                          WorkerResult, child_environment, default_host_memory_mb, default_pool,
                                          resident_mb)

__all__ = ["ScreenOptions", "Job", "WorkerResult", "Worker", "WorkerPool", "TurnPool", "default_pool",
           "child_environment", "default_host_memory_mb", "resident_mb", "GATED_PHASES"]
