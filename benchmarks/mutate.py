"""Never-seen copies of a candidate source: its kernels renamed, and Triton launches retuned.

    python benchmarks/mutate.py examples/triton/rowsum_good.py --tag x1 [--warps half|double] > mutated.py
    python benchmarks/mutate.py examples/*/*.py --tag x1 --report     # what changes, per file (JSON)

A generation loop sends sources that no cache has seen. ``mutate`` turns one example into such a
source without changing what it computes:

- **Rename** (every DSL). Each kernel gets the suffix ``_<tag>``: Python functions decorated with a
  DSL decorator whose last name is one of ``KERNEL_DECORATORS`` (``@triton.jit``,
  ``@T.prim_func``, ...), renamed at every name token that is not an attribute (``T.gemm`` stays);
  CUDA ``__global__`` functions, renamed wherever the name stands as a word not after a dot (C++
  and the Python strings that look a kernel up by name); and the ``name=`` of a
  ``load_inline``/``load`` call (the extension's module). The compiled symbol changes, so the
  source hash, the compile-cache keys and the compiled code all differ from every other tag's.
- **Retune** (Triton launches ``kernel[grid](..., num_warps=E)`` only, ``warps`` given):
  ``half`` makes it ``max(1, (E) // 2)``, ``double`` makes it ``min(8, (E) * 2)``. A Triton
  kernel's result does not depend on its warp count (layouts are the compiler's), only its speed.
  ``triton.Config`` entries of autotuned kernels are left alone. Block sizes and TileLang/CUDA
  thread counts are not changed: whether a kernel masks its tail cannot be told from the text.

A source with no kernel found raises ``ValueError``: a copy that is only a comment apart would hit
the same compiled code.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["KERNEL_DECORATORS", "Mutation", "mutate"]

KERNEL_DECORATORS = frozenset({"jit", "prim_func", "autotune", "heuristics", "kernel"})
"""Last dotted name of a decorator that marks a Python function as a kernel (or wraps one)."""

_GLOBAL = re.compile(r"__global__\b")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_FIRST_CALL = re.compile(r"[^(;{}]*?(\w+)\s*\(")


@dataclass
class Mutation:
    source: str
    renamed: dict[str, str] = field(default_factory=dict)
    """Old name -> new name: kernels and extension modules."""
    retuned: list[str] = field(default_factory=list)
    """``line N: num_warps=OLD -> NEW`` per changed launch."""
    sha256_before: str = ""
    sha256_after: str = ""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def python_kernels(tree: ast.AST) -> list[str]:
    """Names of functions (at any depth) carrying a kernel decorator."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _decorator_name(d) in KERNEL_DECORATORS for d in node.decorator_list):
            if node.name not in names:
                names.append(node.name)
    return names


def cuda_kernels(text: str) -> list[str]:
    """Names of the ``__global__`` functions in any CUDA text of the file."""
    names = []
    for match in _GLOBAL.finditer(text):
        rest = text[match.end():match.end() + 600]
        rest = _LAUNCH_BOUNDS.sub(lambda m: " " * len(m.group()), rest)
        found = _FIRST_CALL.match(rest)
        if found and found.group(1) not in names:
            names.append(found.group(1))
    return names


def _rename_python(source: str, names: dict[str, str]) -> str:
    """Rename name tokens (not attributes, not inside strings or comments)."""
    edits = []
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string in names and not (previous is not None and previous.string == "."):
            edits.append((tok.start, tok.end, names[tok.string]))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = tok
    return _apply(source, edits)


def _apply(source: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(pos: tuple[int, int]) -> int:
        return offsets[pos[0] - 1] + pos[1]

    out = source
    for start, end, text in sorted(edits, key=lambda e: at(e[0]), reverse=True):
        out = out[:at(start)] + text + out[at(end):]
    return out


def _extension_names(tree: ast.AST) -> list[ast.Constant]:
    """The ``name=`` string of each ``load_inline(...)`` / ``cpp_extension.load(...)`` call."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _decorator_name(node.func) in ("load_inline", "load"):
            for kw in node.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    found.append(kw.value)
    return found


def _retune(source: str, warps: str) -> tuple[str, list[str]]:
    tree = ast.parse(source)
    edits, notes = [], []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)):
            continue  # a launch is kernel[grid](...); triton.Config(...) is not
        for kw in node.keywords:
            if kw.arg != "num_warps":
                continue
            old = ast.get_source_segment(source, kw.value)
            new = f"max(1, ({old}) // 2)" if warps == "half" else f"min(8, ({old}) * 2)"
            edits.append(((kw.value.lineno, kw.value.col_offset), (kw.value.end_lineno, kw.value.end_col_offset), new))
            notes.append(f"line {kw.value.lineno}: num_warps={old} -> {new}")
    return _apply(source, edits), notes


def mutate(source: str, tag: str, warps: str | None = None) -> Mutation:
    """``source`` with every kernel renamed to ``<name>_<tag>`` and, with ``warps`` (``half`` or
    ``double``), every Triton launch's ``num_warps`` changed. Raises ValueError without a kernel."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", tag):
        raise ValueError(f"tag {tag!r}: letters, digits and _ only (it ends identifiers)")
    if warps not in (None, "half", "double"):
        raise ValueError(f"warps {warps!r}: half, double or None")
    tree = ast.parse(source)
    renamed = {name: f"{name}_{tag}" for name in python_kernels(tree)}
    out = _rename_python(source, renamed) if renamed else source
    cuda = {name: f"{name}_{tag}" for name in cuda_kernels(out) if name not in renamed}
    for old, new in cuda.items():
        out = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, out)
    renamed.update(cuda)
    tree = ast.parse(out)
    edits = []
    for const in _extension_names(tree):
        new = f"{const.value}_{tag}"
        renamed[const.value] = new
        edits.append(((const.lineno, const.col_offset), (const.end_lineno, const.end_col_offset), repr(new)))
    out = _apply(out, edits)
    if not renamed:
        raise ValueError("no kernel found to rename (no DSL-decorated function, __global__ function or "
                         "load_inline name)")
    retuned: list[str] = []
    if warps is not None:
        out, retuned = _retune(out, warps)
    ast.parse(out)  # still Python
    return Mutation(source=out, renamed=renamed, retuned=retuned, sha256_before=_sha(source), sha256_after=_sha(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="one source (printed mutated), or several with --report")
    parser.add_argument("--tag", required=True, help="suffix of every renamed kernel")
    parser.add_argument("--warps", choices=["half", "double"], help="retune Triton launches")
    parser.add_argument("--report", action="store_true",
                        help="print what changed, per path (JSON; an error as {\"error\": ...}), not the source")
    args = parser.parse_args(argv)
    if not args.report:
        if len(args.paths) != 1:
            parser.error("one path, or --report")
        sys.stdout.write(mutate(args.paths[0].read_text(), args.tag, args.warps).source)
        return 0
    import json

    report = {}
    for path in args.paths:
        try:
            m = mutate(path.read_text(), args.tag, args.warps)
        except (ValueError, SyntaxError) as exc:
            report[str(path)] = {"error": str(exc)}
            continue
        report[str(path)] = {"renamed": m.renamed, "retuned": m.retuned, "sha256_before": m.sha256_before,
                             "sha256_after": m.sha256_after}
    print(json.dumps(report, indent=2))
    return 1 if any("error" in r for r in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
