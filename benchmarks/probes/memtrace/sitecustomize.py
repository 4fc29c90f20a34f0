"""The judge's GPU memory at each step of a screen (investigation, not the gate).

    PYTHONPATH=$PWD/benchmarks/probes/memtrace:$PYTHONPATH python3 benchmarks/kernelbench_all.py ... --only 1/19
    cp benchmarks/probes/memtrace/memtrace.log $OUT/

Loaded by every Python process that has this folder on its path (an absolute path: the workers
run in their own folders). The workers get a cleaned environment, so the log lies in this folder,
not where an environment variable says. In the judge's process it wraps the ``Screen`` steps that
allocate (the reference, the shared copies, the candidate's calls, the cache releases, stage ends)
and appends one line per step: allocated, reserved and peak GiB, and the step. A failing step is
logged with its exception before it propagates.
"""
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memtrace.log")


def _install() -> None:
    import functools
    import importlib.abc
    import sys

    def patch(module) -> None:
        import torch

        screen = module.Screen

        def log(what: str) -> None:
            gib = 1 << 30
            line = (f"{os.getpid()} alloc {torch.cuda.memory_allocated() / gib:7.2f} reserved "
                    f"{torch.cuda.memory_reserved() / gib:7.2f} peak {torch.cuda.max_memory_allocated() / gib:7.2f} {what}")
            with open(_PATH, "a") as handle:
                handle.write(line + "\n")

        def wrap(owner, name: str) -> None:
            original = getattr(owner, name)

            @functools.wraps(original)
            def traced(*args, **kwargs):
                label = f"{owner.__name__}.{name}" + (f"({args[1]!r})" if len(args) > 1 and isinstance(args[1], str) else "")
                if name == "load":  # which problem this process screens: the lines are told apart by pid
                    label += f" {args[0].job.problem.name}"
                log("enter " + label)
                try:
                    result = original(*args, **kwargs)
                except BaseException as exc:
                    log(f"raise {label}: {type(exc).__name__}: {str(exc)[:200]}")
                    raise
                log("leave " + label)
                return result

            setattr(owner, name, traced)

        for name in ("load", "calibrate", "expected", "shared", "stage_done", "part_done", "_free_cache",
                     "_trials", "_probe_history", "_probe_shape", "_library_share", "timing", "_timed", "finish"):
            if hasattr(screen, name):
                wrap(screen, name)
        for name in ("call", "release", "slot", "recopy"):
            if hasattr(module.Remote, name):
                wrap(module.Remote, name)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != "kernelgate.worker.stages":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            sys.meta_path.insert(0, self)
            loader = spec.loader
            original_exec = loader.exec_module

            def exec_module(module):
                original_exec(module)
                patch(module)

            loader.exec_module = exec_module
            return spec

    import importlib.util
    sys.meta_path.insert(0, Finder())


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows, if the interpreter has one further on its path."""
    import importlib.machinery
    import importlib.util
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.machinery.PathFinder.find_spec(
        "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != here])
    if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(__file__):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_install()
_chain()
