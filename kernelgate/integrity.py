"""Integrity: the checks that catch a candidate gaming the evaluation rather than failing it.

Three layers, each with named reasons (``kernelgate.models.Reason``):

1. **Static rules** over the source (``scan``), AST-based. Each hit is a ``Hit`` with the rule,
   the line and the code on it. Some rules reject on their own: nothing an honest kernel does
   needs them (patching timers, torch, the harness or ``sys.modules``; importing kernelgate;
   changing process-wide math settings; walking the caller's frames or the garbage collector's
   objects). The others are *evidence*: a side stream, a thread, a module-level cache, a call to
   the library op, an ``os.environ`` read, a file write. They reject only together with a
   runtime observation, and the verdict then quotes them; alone they become ``info`` findings.
2. **Runtime guard** in the worker (``Guard``), armed before the candidate is imported:
   ``id()`` snapshots of timer, torch and harness functions (and the ``__code__`` of the
   harness's own functions, since a code swap keeps the function's id) and of process-wide
   math flags; an audit hook that records a fork, a subprocess, a write outside the worker's
   temp dir, and frame or ``gc`` introspection done by candidate code (attributed by the nearest
   non-stdlib frame); threads started by candidate code. Violations are recorded even when the
   candidate swallows the exception the hook raises.
3. **Torch-op recorder** (``OpRecorder``): a ``TorchFunctionMode`` around one forward call
   lists the torch ops the candidate itself called and the size of their operands. A compute op
   on tensors as large as the problem's inputs means the library did the work
   (``library_op_used``). On a GPU, ``gpu_kernel_share`` adds the profiler's view: the device
   time of kernels that are not the candidate's DSL kernels.

The physics floor (U > 1.1 in two timings) and the wall-clock cross-check live in the policy.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys
import sysconfig
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from kernelgate.models import Failure, Finding, Reason

__all__ = ["Hit", "scan", "static_failure", "evidence_findings", "evidence_for", "Guard", "OpRecorder",
           "heavy_ops", "large_copies", "gpu_kernel_share", "kernel_identity", "NON_COMPUTE_OPS", "COPY_OPS", "PARSE_LOCK"]


@dataclass(frozen=True)
class Hit:
    """One static rule that matched one line of the candidate."""

    rule: str
    """Stable rule id, e.g. ``timer_patch``, ``side_stream``."""
    reason: Reason
    """The reject reason this rule supports."""
    rejects: bool
    """True: the hit alone rejects. False: evidence, combined with a runtime check."""
    line: int
    code: str
    """The source line, stripped."""
    message: str

    @property
    def evidence(self) -> str:
        return f"line {self.line}: {self.code}"


# --- static rules ---------------------------------------------------------------------------

_INTROSPECTION_CALLS = {
    "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "inspect.currentframe",
    "inspect.stack", "inspect.getouterframes", "inspect.trace", "inspect.getframeinfo", "gc.get_objects",
    "gc.get_referrers", "gc.get_referents", "traceback.walk_stack", "traceback.extract_stack",
    "threading.settrace", "threading.setprofile",
}
_FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_builtins"}
_SETTINGS_CALLS = {
    "torch.set_float32_matmul_precision", "torch.use_deterministic_algorithms", "torch.set_default_dtype",
    "torch.set_default_tensor_type", "torch.set_flush_denormal", "torch.cuda.set_per_process_memory_fraction",
    "torch.cuda.set_sync_debug_mode", "torch.set_default_device", "torch.cuda.memory.set_per_process_memory_fraction",
    "torch.backends.cuda.preferred_blas_library",
}
_DISPATCH_ESCAPES = ("_DisableTorchDispatch", "DisableTorchFunction", "_pop_mode", "_disable_current_modes",
                     "_python_dispatch", "_push_mode", "_set_torch_function_mode", "_len_torch_function_stack")
_RAW_CUDA_CLASSES = frozenset({"_CudaStreamBase", "_CudaEventBase"})
"""torch.cuda.Stream's and Event's C bases: a stream made from them skips ``_wrap_stream_creation``."""
_STREAM_CALLS = {"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.cuda.set_stream",
                 "torch.cuda.streams.Stream", "torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.Stream",
                 "torch.cuda.StreamContext"}
_PROCESS_CALLS = ("os.fork", "os.forkpty", "os.system", "os.popen", "os.exec", "os.spawn", "os.posix_spawn",
                  "subprocess.", "multiprocessing.", "pty.")
_THREAD_MODULES = ("threading", "_thread", "concurrent", "asyncio", "multiprocessing")
_LIBRARY_OPS = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "layer_norm", "rms_norm", "group_norm",
    "batch_norm", "instance_norm", "softmax", "log_softmax", "sum", "mean", "var", "std", "var_mean", "norm",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "scaled_dot_product_attention", "cumsum", "cumprod", "logsumexp", "amax", "amin", "max", "min", "prod",
    "gelu", "relu", "silu", "tanh", "sigmoid", "exp", "dot", "matrix_power", "tensordot", "inner", "outer",
}
_FILE_WRITES = {"os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir", "os.mkdir", "os.makedirs",
                "os.chmod", "os.symlink", "os.link", "os.truncate", "shutil.rmtree", "shutil.copy", "shutil.copyfile",
                "shutil.move", "shutil.copytree"}
_DYNAMIC = {"exec", "eval", "compile", "__import__", "importlib.import_module", "ctypes", "cffi", "builtins.exec",
            "builtins.eval"}


class _Scanner(ast.NodeVisitor):
    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()
        self.aliases: dict[str, str] = {}
        self.hits: list[Hit] = []
        self.module_containers: set[str] = set()
        self.function_depth = 0

    # helpers
    def add(self, node: ast.AST, rule: str, reason: Reason, rejects: bool, message: str) -> None:
        line = getattr(node, "lineno", 0)
        code = self.lines[line - 1].strip()[:200] if 0 < line <= len(self.lines) else ""
        self.hits.append(Hit(rule, reason, rejects, line, code, message))

    def dotted(self, node: ast.AST) -> str | None:
        """``F.softmax`` -> ``torch.nn.functional.softmax``; ``getattr(torch, "cuda")`` -> ``torch.cuda``."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            base = self.dotted(node.args[0])
            return f"{base}.{node.args[1].value}" if base else None
        if isinstance(node, ast.Subscript):
            return self.dotted(node.value)
        return None

    def module_rooted(self, node: ast.AST) -> str | None:
        """The dotted name when it starts at an imported module (or a name imported from one)."""
        name = self.dotted(node)
        if not name:
            return None
        root = name.split(".")[0]
        imported_roots = {v.split(".")[0] for v in self.aliases.values()}
        return name if root in imported_roots or root in sys.builtin_module_names or root == "builtins" else None

    # imports
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            self._check_import(node, a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for a in node.names:
            self.aliases[a.asname or a.name] = f"{module}.{a.name}" if module else a.name
            self._check_import(node, f"{module}.{a.name}")

    def _check_import(self, node: ast.AST, name: str) -> None:
        if name.split(".")[0] == "kernelgate":
            self.add(node, "harness_import", Reason.tampering, True,
                     "imports kernelgate: the gate's own modules are not the candidate's to touch")
        elif name.split(".")[0] in _THREAD_MODULES:
            self.add(node, "threads", Reason.background_work, False, f"imports {name}: work may run outside the call")
        elif any(esc in name for esc in _DISPATCH_ESCAPES) or name.startswith("torch.overrides.TorchFunctionMode"):
            self.add(node, "mode_escape", Reason.tampering, True,
                     "imports torch's dispatch-mode internals: could hide torch calls from the gate")
        elif name.split(".")[0] in ("ctypes", "cffi"):
            self.add(node, "dynamic_code", Reason.forbidden_call, False, f"imports {name}: native calls escape the checks")

    # function context
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for deco in node.decorator_list:
            name = self.dotted(deco.func if isinstance(deco, ast.Call) else deco) or ""
            if name.endswith(("lru_cache", "functools.cache", "cache")) and name.split(".")[-1] in ("lru_cache", "cache"):
                self.add(deco, "output_cache", Reason.output_caching, False, "memoizes a function: outputs may be replayed")
        self.function_depth += 1
        self.generic_visit(node)
        self.function_depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    # assignments: patches and caches
    def _target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._target(t, node)
            return
        if isinstance(target, ast.Attribute) and target.attr in ("__code__", "__globals__", "__builtins__", "__dict__",
                                                                 "__class__", "__torch_function__", "__torch_dispatch__"):
            if target.attr in ("__torch_function__", "__torch_dispatch__") and self.function_depth == 0:
                pass  # a class body defining its own protocol (a tensor subclass): the output check sees it
            else:
                self.add(node, "code_swap", Reason.tampering, True, f"assigns {target.attr}: replaces code or globals")
                return
        if isinstance(target, ast.Subscript):
            name = self.dotted(target.value)
            if name in ("os.environ",):
                self.add(node, "environment_access", Reason.forbidden_call, False, "writes the environment")
                return
            if name and name.startswith("sys.modules"):
                return  # reported by visit_Attribute
            if self.function_depth > 0 and isinstance(target.value, ast.Name) and target.value.id in self.module_containers:
                self.add(node, "output_cache", Reason.output_caching, False,
                         f"fills the module-level {target.value.id} inside a function: a cache of results")
                return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            name = self.module_rooted(target)
            if name:
                self.add(node, "harness_patch", Reason.tampering, True,
                         f"assigns {name}: patches a module the gate relies on (timers, checks, math settings)")

    def visit_Assign(self, node: ast.Assign) -> None:
        if self.function_depth == 0 and isinstance(node.value, (ast.Dict, ast.List, ast.Set, ast.Call)):
            is_container = not isinstance(node.value, ast.Call) or (self.dotted(node.value.func) or "").split(".")[-1] in (
                "dict", "list", "set", "defaultdict", "OrderedDict", "WeakValueDictionary", "WeakKeyDictionary", "deque")
            if is_container:
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.module_containers.add(t.id)
        for t in node.targets:
            self._target(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._target(t, node)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        if self.function_depth > 0:
            self.add(node, "output_cache", Reason.output_caching, False,
                     f"rebinds module state ({', '.join(node.names)}) inside a function: results may carry over")

    # names and attributes
    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.dotted(node) or ""
        if node.attr in _FRAME_ATTRS:
            self.add(node, "introspection", Reason.introspection, True,
                     f"reads .{node.attr}: walks frames, where the gate's locals (the reference output) live")
        elif node.attr in _RAW_CUDA_CLASSES:
            self.add(node, "raw_stream", Reason.side_stream, True,
                     f"reaches torch's raw {node.attr}: a stream or event the gate's stream wrapper does not see")
        elif name == "sys.modules" or name.startswith("sys.modules."):
            self.add(node, "sys_modules", Reason.tampering, True, "touches sys.modules: could swap the gate's modules")
        elif any(esc in name for esc in _DISPATCH_ESCAPES):
            self.add(node, "mode_escape", Reason.tampering, True,
                     f"uses {name}: could hide torch calls from the gate's op recorder")
        elif name in ("os.environ", "os.environb") and isinstance(node.ctx, ast.Load):
            self.add(node, "environment_access", Reason.forbidden_call, False, "reads the environment")
        elif name.endswith(".data_ptr") and self.function_depth > 0:
            self.add(node, "pointer_key", Reason.output_caching, False, "reads a data pointer: a cache key by address?")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.dotted(node.func) or ""
        short = name.split(".")[-1]
        if name in _INTROSPECTION_CALLS:
            self.add(node, "introspection", Reason.introspection, True,
                     f"calls {name}: inspects the gate's frames or objects (where the reference output lives)")
        elif name in _SETTINGS_CALLS or (name.startswith("torch.backends.") and short.startswith("allow")):
            self.add(node, "settings_change", Reason.tampering, True,
                     f"calls {name}: changes a process-wide setting the reference shares (precision, memory)")
        elif name == "setattr" and node.args:
            target = self.module_rooted(node.args[0])
            if target:
                self.add(node, "harness_patch", Reason.tampering, True, f"setattr on {target}: patches a module")
            else:
                self.add(node, "dynamic_setattr", Reason.tampering, False, "setattr on a computed object")
        elif name in _STREAM_CALLS or short in ("Stream", "ExternalStream", "CUDAGraph") and name.startswith("torch"):
            self.add(node, "side_stream", Reason.side_stream, False,
                     f"calls {name}: work on another stream escapes the default-stream timer")
        elif name.startswith(_PROCESS_CALLS):
            self.add(node, "process_spawn", Reason.forbidden_call, False, f"calls {name}: starts another process")
        elif name.startswith(("threading.", "_thread.", "concurrent.futures.")) and short in (
                "Thread", "Timer", "start_new_thread", "ThreadPoolExecutor", "ProcessPoolExecutor", "submit"):
            self.add(node, "threads", Reason.background_work, False, f"calls {name}: work may finish after the call")
        elif name in _FILE_WRITES or (name == "open" and _opens_for_write(node)) or short in ("write_text", "write_bytes"):
            self.add(node, "file_write", Reason.forbidden_call, False, f"calls {name}: writes files")
        elif name in ("os.getenv", "os.getenvb", "os.putenv", "os.unsetenv"):
            self.add(node, "environment_access", Reason.forbidden_call, False, f"calls {name}: reads the environment")
        elif name in _DYNAMIC or name.startswith(("ctypes.", "cffi.")):
            self.add(node, "dynamic_code", Reason.forbidden_call, False, f"calls {name}: code the static rules cannot see")
        elif self.function_depth > 0 and short in _LIBRARY_OPS and (
                name.startswith("torch.") or (isinstance(node.func, ast.Attribute) and not self.module_rooted(node.func))):
            self.add(node, "library_op", Reason.library_op_used, False,
                     f"calls {name or short}: the library may do the work (checked at run time)")
        elif name in ("id", "hash") and self.function_depth > 0:
            self.add(node, "pointer_key", Reason.output_caching, False, f"calls {name}(): a cache key by identity?")
        elif short in ("tobytes", "tolist") and self.function_depth > 0:
            self.add(node, "content_key", Reason.output_caching, False, f"calls {short}(): a cache key by content?")
        elif short in ("setdefault", "update", "append") and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in self.module_containers and self.function_depth > 0:
            self.add(node, "output_cache", Reason.output_caching, False,
                     f"fills the module-level {node.func.value.id} inside a function: a cache of results")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.function_depth > 0:
            self.add(node, "library_op", Reason.library_op_used, False, "uses @: torch's matmul may do the work")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        parts = [node.left, *node.comparators]
        shapey = any(_mentions_shape(p) for p in parts)
        literal = any(_is_shape_literal(p) for p in parts)
        if shapey and literal and self.function_depth > 0:
            self.add(node, "shape_literal", Reason.shape_specialized, False,
                     "branches on a literal shape: code may be right only at the tested shape")
        self.generic_visit(node)


def _opens_for_write(node: ast.Call) -> bool:
    mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def _mentions_shape(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in ("shape", "size", "numel"):
            return True
    return False


def _is_shape_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value >= 2
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(isinstance(e, ast.Constant) and isinstance(e.value, int) for e in node.elts)
    return False


PARSE_LOCK = threading.Lock()
"""Held while the gate parses a candidate. CPython 3.11's parser is not safe in several threads at
once (concurrent parses can raise ``SystemError: AST constructor recursion depth mismatch``)."""


def scan(source: str) -> list[Hit]:
    """Every static rule that matches the source, in line order. Unparsable source: no hits."""
    try:
        with PARSE_LOCK:
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    scanner = _Scanner(source)
    scanner.visit(tree)
    unique = {(h.rule, h.line): h for h in scanner.hits}
    return sorted(unique.values(), key=lambda h: (h.line, h.rule))


def static_failure(hits: Iterable[Hit]) -> Failure | None:
    """A reject from the rules that reject alone (the first such hit, plus up to four more lines)."""
    rejecting = [h for h in hits if h.rejects]
    if not rejecting:
        return None
    first = rejecting[0]
    lines = [f"{h.evidence}  [{h.rule}: {h.message}]" for h in rejecting[:5]]
    return Failure(reason=first.reason, stage="static", message="static integrity rule(s):\n" + "\n".join(lines))


def evidence_for(hits: Iterable[Hit], *reasons: Reason) -> str:
    """The static evidence lines that support a runtime finding, for its message."""
    lines = [h.evidence for h in hits if not h.rejects and h.reason in reasons]
    return ("; static evidence: " + " | ".join(lines[:4])) if lines else ""


def evidence_findings(hits: Iterable[Hit]) -> list[Finding]:
    """Evidence-only hits as ``info`` findings on the verdict (they did not reject)."""
    return [Finding(code=f"integrity_{h.rule}", kind="info", evidence=h.evidence,
                    hint=f"{h.message}; the gate checked it at run time") for h in hits if not h.rejects]


# --- runtime guard --------------------------------------------------------------------------

_STDLIB = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.symlink", "os.link", "os.truncate",
                "os.chown", "shutil.rmtree", "shutil.copyfile", "shutil.move", "os.utime"}
_PROCESS_EVENTS = {"os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
                   "os.kill", "os.killpg", "pty.spawn"}
_INTROSPECTION_EVENTS = {"sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers",
                         "gc.get_referents", "sys.settrace", "sys.setprofile"}
_INSPECT_HELPERS = ("inspect.py", "traceback.py")


def _settings() -> dict[str, object]:
    import torch

    flags: dict[str, object] = {
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "torch.get_default_dtype()": torch.get_default_dtype(),
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "torch.backends.cudnn.enabled": torch.backends.cudnn.enabled,
    }
    return flags


_TORCH_WATCHED = ("isfinite", "isnan", "isinf", "equal", "allclose", "isclose", "abs", "max", "min", "sum", "mean",
                  "where", "sqrt", "zeros", "zeros_like", "empty", "empty_like", "ones", "rand", "randn", "randint",
                  "no_grad", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled", "Generator",
                  "Tensor", "is_tensor", "get_float32_matmul_precision", "set_float32_matmul_precision", "float64",
                  "as_strided", "cat", "stack")
"""Top-level torch names the gate relies on. Not the whole namespace: torch replaces some of its own
entries lazily (``torch._dynamo`` wraps ``torch.manual_seed`` when it is first imported)."""


def _TorchView(torch) -> dict:
    return {name: getattr(torch, name) for name in _TORCH_WATCHED if hasattr(torch, name)}


def _watched_namespaces() -> dict[str, dict]:
    """Name -> namespace dict whose entries must keep their identity while the candidate runs."""
    import json
    import time

    import torch

    spaces: dict[str, dict] = {"builtins": vars(builtins), "time": vars(time), "json": vars(json), "os": vars(os),
                               "threading": vars(threading), "torch": _TorchView(torch),
                               "torch.Tensor": dict(vars(torch.Tensor)), "torch._C.TensorBase": dict(vars(torch._C.TensorBase)),
                               "torch.cuda": vars(torch.cuda), "torch.cuda.Event": dict(vars(torch.cuda.Event)),
                               "torch.testing": vars(torch.testing), "torch.nn.functional": vars(torch.nn.functional),
                               "torch.utils.deterministic": vars(sys.modules["torch.utils.deterministic"])
                               if "torch.utils.deterministic" in sys.modules else {}}
    if "triton.testing" in sys.modules:
        spaces["triton.testing"] = vars(sys.modules["triton.testing"])
    main = sys.modules.get("__main__")
    harness = {name: module for name, module in list(sys.modules.items())
               if name.startswith("kernelgate") and module is not None and name != "kernelgate_candidate"}
    if getattr(main, "__spec__", None) is not None and str(main.__spec__.name).startswith("kernelgate"):
        harness["__main__"] = main  # the candidate's process runs as python -m kernelgate.worker.candidate
    for name, module in harness.items():
        spaces[name] = vars(module)
        for key, value in list(vars(module).items()):  # the harness's classes: their methods too
            if isinstance(value, type) and value.__module__ == module.__name__:
                spaces[f"{name}.{key}"] = dict(vars(value))
    return spaces


def _snapshot() -> dict[tuple[str, str], int]:
    snap: dict[tuple[str, str], int] = {}
    for space, namespace in _watched_namespaces().items():
        for key, value in list(namespace.items()):
            if key.startswith("__") and key not in ("__init__", "__eq__", "__torch_function__", "__torch_dispatch__"):
                continue
            if isinstance(value, (int, float, str, bytes, bool, type(None))) and space != "torch.utils.deterministic":
                continue  # plain constants; module-level counters change legitimately
            snap[(space, key)] = id(value)
            code = getattr(value, "__code__", None)
            if code is not None and space.startswith(("kernelgate", "__main__")):
                snap[(space, key + ".__code__")] = id(code)
    snap.pop(("torch.utils.deterministic", "fill_uninitialized_memory"), None)  # toggled by the gate itself
    return snap


class Guard:
    """Runtime integrity checks for one candidate in one worker process.

    ``arm`` before the candidate is imported; ``check`` after every call into candidate code and
    before each result leaves the process. A violation is kept until ``check`` reports it.
    """

    _hook_installed = False
    _current: "Guard | None" = None

    def __init__(self, workdir: Path, candidate_path: Path, allowed_write_dirs: Iterable[str] = ()) -> None:
        self.workdir = Path(workdir).resolve()
        self.candidate_path = str(candidate_path)
        self.allowed = [str(self.workdir)] + [str(Path(d).resolve()) for d in allowed_write_dirs if d] + ["/dev/null"]
        self.violations: list[tuple[Reason, str]] = []
        self._snapshot: dict[tuple[str, str], int] = {}
        self._settings: dict[str, object] = {}
        self._threads: set[int] = set()
        self._busy = threading.local()
        self._pins: dict[tuple[int, str], tuple[object, str, int]] = {}

    # arming
    def arm(self) -> None:
        Guard._current = self
        if not Guard._hook_installed:
            sys.addaudithook(_audit)
            _wrap_thread_start()
            _wrap_stream_creation()
            Guard._hook_installed = True
        self._threads = {t.ident for t in threading.enumerate() if t.ident is not None}
        self._settings = _settings()
        self._snapshot = _snapshot()

    def pin(self, owner: object, *names: str) -> None:
        """Attributes of a harness object that must keep their identity from now on (the runner's
        ``torch``, its guard, its forward, its gate): instance attributes no namespace snapshot sees."""
        for name in names:
            self._pins[(id(owner), name)] = (owner, name, id(getattr(owner, name, None)))

    # attribution
    def candidate_frame(self, depth: int = 2, whole_stack: bool = False):
        """The nearest non-stdlib frame above the audited call, if it is the candidate's."""
        frame = sys._getframe(depth)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename == self.candidate_path:
                return frame
            if not whole_stack and not filename.startswith(_STDLIB) and not filename.startswith("<frozen"):
                return None
            frame = frame.f_back
        return None

    def record(self, reason: Reason, message: str) -> None:
        if len(self.violations) < 20:
            self.violations.append((reason, message))

    def _write_allowed(self, path: object) -> bool:
        try:
            resolved = str(Path(os.fsdecode(path)).resolve()) if not isinstance(path, int) else None
        except (TypeError, ValueError, OSError):
            return False
        return resolved is None or any(resolved == a or resolved.startswith(a + os.sep) for a in self.allowed)

    # checks
    def check(self, when: str) -> tuple[Reason, str] | None:
        """The first violation seen so far, or a changed identity, flag or thread; None when clean."""
        if self.violations:
            reason, message = self.violations[0]
            return reason, f"{message} (seen {when})"
        changed_settings = [k for k, v in _settings().items() if self._settings.get(k) != v]
        if changed_settings:
            return Reason.tampering, f"process-wide settings changed {when}: {', '.join(changed_settings)}"
        now = _snapshot()
        changed = sorted(f"{space}.{key}" for (space, key), ident in self._snapshot.items()
                         if (space, key) in now and now[(space, key)] != ident)
        removed = sorted(f"{space}.{key}" for (space, key) in self._snapshot if (space, key) not in now)
        moved = sorted(f"{type(owner).__name__}.{name}" for owner, name, ident in self._pins.values()
                       if id(getattr(owner, name, None)) != ident)
        if changed or removed or moved:
            names = (changed + removed + moved)[:6]
            return Reason.tampering, f"replaced {when}: {', '.join(names)} (timer, torch or harness functions)"
        alive = [t for t in threading.enumerate() if t.ident not in self._threads and t.is_alive()]
        if alive:
            return Reason.background_work, (f"{len(alive)} thread(s) still running {when}: "
                                            + ", ".join(t.name for t in alive[:4]))
        return None


def _audit(event: str, args: tuple) -> None:
    guard = Guard._current
    if guard is None or getattr(guard._busy, "on", False):
        return
    if event not in _PROCESS_EVENTS and event not in _INTROSPECTION_EVENTS and event != "open" \
            and event not in _PATH_EVENTS and event != "object.__setattr__":
        return
    guard._busy.on = True
    try:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                     (isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            if writes and not guard._write_allowed(path) and guard.candidate_frame(2) is not None:
                guard.record(Reason.forbidden_call, f"the candidate opened {path!s:.200} for writing, outside its temp dir")
                raise PermissionError(f"kernelgate: writing {path} is not allowed")
        elif event in _PATH_EVENTS:
            path = args[0] if args else None
            if guard.candidate_frame(2) is not None and not guard._write_allowed(path):
                guard.record(Reason.forbidden_call, f"the candidate called {event} on {path!s:.200}, outside its temp dir")
                raise PermissionError(f"kernelgate: {event} on {path} is not allowed")
        elif event in _PROCESS_EVENTS:
            if guard.candidate_frame(2, whole_stack=True) is not None:
                guard.record(Reason.forbidden_call, f"the candidate tried {event}: no processes may be started")
                raise PermissionError(f"kernelgate: {event} is not allowed")
        elif event == "object.__setattr__":
            if len(args) >= 2 and args[1] in ("__code__", "__globals__", "__defaults__", "__kwdefaults__") \
                    and guard.candidate_frame(2) is not None:
                guard.record(Reason.tampering, f"the candidate set {args[1]} of {getattr(args[0], '__qualname__', args[0])!s:.100}")
                raise PermissionError("kernelgate: code replacement is not allowed")
        else:  # introspection: the direct caller (or inspect/traceback on its behalf) is the candidate
            frame = sys._getframe(1)
            for _ in range(4):
                if frame is None:
                    break
                name = frame.f_code.co_filename
                if name == guard.candidate_path:
                    guard.record(Reason.introspection, f"the candidate called {event}: it inspects the gate's frames or objects")
                    raise PermissionError(f"kernelgate: {event} is not allowed")
                if not name.endswith(_INSPECT_HELPERS):
                    break
                frame = frame.f_back
    finally:
        guard._busy.on = False


def _wrap_thread_start() -> None:
    original = threading.Thread.start

    def start(self, *args, **kwargs):
        guard = Guard._current
        if guard is not None and guard.candidate_frame(2, whole_stack=True) is not None:
            guard.record(Reason.background_work, f"the candidate started thread {self.name!r}: work outside the call")
        return original(self, *args, **kwargs)

    start.__wrapped__ = original  # type: ignore[attr-defined]
    threading.Thread.start = start


def _wrap_stream_creation() -> None:
    """On a GPU, a CUDA stream created by candidate code is recorded (the timer sees one stream)."""
    import torch

    if not torch.cuda.is_available():
        return
    for cls in (torch.cuda.Stream, getattr(torch.cuda, "ExternalStream", None)):
        if cls is None:
            continue
        original = cls.__new__

        def new(klass, *args, __original=original, **kwargs):
            stream = __original(klass, *args, **kwargs)
            guard = Guard._current
            # torch.cuda.current_stream() and default_stream() wrap a stream that exists (stream_id=...):
            # asking for the current stream to launch on is what an honest extension does
            if guard is None or "stream_id" in kwargs or _is_timed_stream(stream):
                return stream
            if guard.candidate_frame(2, whole_stack=True) is not None:
                guard.record(Reason.side_stream, f"the candidate created a CUDA stream ({klass.__name__}): work on it "
                                                 "escapes the default-stream timer")
            return stream

        cls.__new__ = staticmethod(new)


def _is_timed_stream(stream) -> bool:
    """The stream the gate times on (the current one, which is the default stream)."""
    import torch

    try:
        return stream.cuda_stream in (torch.cuda.current_stream().cuda_stream, torch.cuda.default_stream().cuda_stream)
    except Exception:
        return False


# --- torch-op recorder ----------------------------------------------------------------------

NON_COMPUTE_OPS = frozenset("""
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like new_empty new_zeros new_ones new_full
arange data_ptr __get__ size stride dim numel nelement contiguous is_contiguous view view_as reshape reshape_as flatten
unflatten t transpose permute expand expand_as squeeze unsqueeze __getitem__ __setitem__ clone copy_ to cpu cuda
float half bfloat16 double int long type detach detach_ requires_grad_ element_size storage_offset is_floating_point
__len__ __repr__ __format__ __str__ item tolist fill_ zero_ narrow split chunk unbind select as_strided cat stack
is_cuda numpy untyped_storage __bool__ __index__ __int__ __float__ __hash__ get_device is_complex movedim swapaxes
__iter__ __contains__ __reduce_ex__ __deepcopy__ _make_subclass as_subclass is_nonzero __array__ cdiv
dtype device shape is_leaf grad_fn requires_grad layout names is_sparse T mT H mH data ndim is_quantized is_meta
""".split())
"""Torch calls that allocate, view, move or describe data: not the library doing the work."""


class OpRecorder:
    """Records the torch calls made while it is active, with the largest tensor operand of each."""

    _mode_class = None

    def __init__(self) -> None:
        if OpRecorder._mode_class is None:  # one class for every recorder: defining it costs more than a call
            from torch.overrides import TorchFunctionMode

            class _Mode(TorchFunctionMode):
                def __init__(self, recorder) -> None:
                    super().__init__()
                    self.recorder = recorder

                def __torch_function__(self, func, types, args=(), kwargs=None):
                    kwargs = kwargs or {}
                    name = getattr(func, "__name__", str(func))
                    if name not in NON_COMPUTE_OPS:
                        self.recorder.calls.append((name, _largest(args, kwargs)))
                    if name in HOST_READ_OPS:  # noted before the call: a read that fails still read
                        self.recorder._note_host_read(name, args, kwargs)
                    result = func(*args, **kwargs)
                    if name in COPY_OPS:
                        self.recorder._note_copy(name, args, result)
                    return result

            OpRecorder._mode_class = _Mode
        self.calls: list[tuple[str, int]] = []
        self.copies: list[tuple[str, int]] = []
        """Calls that copied data (a new buffer, or ``copy_``), with the elements copied."""
        self.to_host: list[tuple[str, int]] = []
        """Reads of device tensors into host memory (``.cpu()``, ``.numpy()``, ``.tolist()``, a copy
        or ``.to`` onto the CPU), with the elements read."""
        self._mode = OpRecorder._mode_class(self)

    def _note_host_read(self, name: str, args, kwargs) -> None:
        import torch

        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors:
            return
        if name == "copy_":  # copy_(destination, source): a device source into a host destination
            if len(tensors) < 2 or tensors[0].device.type != "cpu" or tensors[1].device.type == "cpu":
                return
            self.to_host.append((name, tensors[1].numel()))
            return
        source = tensors[0]
        if source.device.type == "cpu":
            return
        if name == "to" and not any(_names_cpu(a) for a in list(args[1:]) + list(kwargs.values())):
            return
        self.to_host.append((name, source.numel()))

    def _note_copy(self, name: str, args, result) -> None:
        import torch

        source = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if name == "copy_":
            size = source.numel() if source is not None else 0
        elif isinstance(result, torch.Tensor) and (source is None or result.data_ptr() != source.data_ptr()):
            size = result.numel()
        else:  # a no-op: already contiguous, already that dtype
            return
        self.copies.append((name, size))

    def __enter__(self) -> "OpRecorder":
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)


def _largest(args, kwargs) -> int:
    import torch

    best = 0
    for value in list(args) + list(kwargs.values()):
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, torch.Tensor):
                best = max(best, item.numel())
    return best


HOST_READ_OPS = frozenset("cpu numpy tolist to copy_".split())
"""Tensor calls that may read a device tensor into host memory; ``OpRecorder`` notes those that do."""


def _names_cpu(value) -> bool:
    """Whether a ``.to()`` argument names the CPU (a device, a string, a tensor on the CPU)."""
    import torch

    if isinstance(value, torch.device):
        return value.type == "cpu"
    if isinstance(value, str):
        return value.split(":")[0] == "cpu"
    return isinstance(value, torch.Tensor) and value.device.type == "cpu"


COPY_OPS = frozenset("contiguous clone to float half bfloat16 double type copy_ cat stack".split())
"""Tensor calls that may copy data; ``OpRecorder`` notes those that did."""


def large_copies(copies: list[tuple[str, int]], problem_elements: int, share: float = 0.5) -> list[str]:
    """Copies in forward of at least ``share`` of the problem's largest input: an extra pass over memory each."""
    limit = max(1, int(share * problem_elements))
    return [f"{name} of {size:,} elements" for name, size in copies if size >= limit]


def heavy_ops(calls: list[tuple[str, int]], problem_elements: int, share: float = 0.5) -> list[str]:
    """Compute calls that together touched at least ``share`` of the problem's largest input: one
    big call, or the same work cut into slices (a third of the rows at a time)."""
    limit = max(1, int(share * problem_elements))
    seen: dict[str, int] = {}
    for name, size in calls:
        seen[name] = seen.get(name, 0) + size
    if sum(seen.values()) < limit:
        return []
    return [f"{name} on {size:,} elements in all" for name, size in sorted(seen.items(), key=lambda kv: -kv[1])]


def kernel_identity(profiler_name: str) -> str:
    """A kernel's name as the profiler shows it, reduced to its function identifier: ``void
    ns::rowsum<128>(float const*, float*, int)`` -> ``rowsum``; Triton's and TileLang's names are
    already plain identifiers."""
    name = profiler_name.strip()
    if name.startswith("void "):
        name = name[5:]
    for stop in ("(", "<"):
        name = name.split(stop, 1)[0]
    return name.rsplit("::", 1)[-1].strip()


def gpu_kernel_share(fn, inputs: list, dsl_kernel_names: Iterable[str]) -> tuple[float, list[str]] | None:
    """On a GPU: the share of one call's device time spent in kernels that are not the DSL's own.

    A kernel is the candidate's when its identifier (``kernel_identity``) is exactly one of
    ``dsl_kernel_names``, the names the plug-in recorded for the kernels it compiled: never a
    substring, so a library kernel whose name contains the candidate's (or the other way) is not
    taken for it. Memory copies and sets are nobody's. Returns (share, the top foreign kernel
    names) or None when the profiler saw no kernel.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    names = set(dsl_kernel_names)
    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad():
        fn(*inputs)
        torch.cuda.synchronize()
    total, foreign = 0.0, {}
    for event in prof.events():
        device_us = getattr(event, "device_time", None) or getattr(event, "cuda_time", 0) or 0
        if getattr(event, "device_type", None) != torch.autograd.DeviceType.CUDA or device_us <= 0:
            continue
        total += device_us
        lowered = event.name.lower()
        if kernel_identity(event.name) not in names and not lowered.startswith(("memset", "memcpy", "[memset",
                                                                                   "[memcpy")):
            foreign[event.name] = foreign.get(event.name, 0.0) + device_us
    if total <= 0:
        return None
    top = sorted(foreign, key=foreign.get, reverse=True)[:3]
    return sum(foreign.values()) / total, top


class compiler_section:
    """Gate code that runs a DSL's compiler on the candidate's behalf (nvcc, ptxas, ninja, TileLang).

    Inside it the runtime guard lets processes start and files be written: the compilers a plug-in
    calls must not count as the candidate's own forks or writes. Plug-ins enter it only around their
    calls into the real compiler, never around candidate code.
    """

    on_change = None
    """Called with the number of sections open whenever it changes (the candidate's process tells
    the judge that a compiler runs, so a long compile meets the load deadline, not the run one)."""
    _depth = 0

    def __enter__(self):
        guard = Guard._current
        self._guard, self._was = guard, (getattr(guard._busy, "on", False) if guard is not None else False)
        if guard is not None:
            guard._busy.on = True
        compiler_section._depth += 1
        if compiler_section.on_change is not None:
            compiler_section.on_change(compiler_section._depth)
        return self

    def __exit__(self, *exc) -> None:
        compiler_section._depth -= 1
        if compiler_section.on_change is not None:
            compiler_section.on_change(compiler_section._depth)
        if self._guard is not None:
            self._guard._busy.on = self._was
