"""Reading compiler text for kernel facts: brace-matched regions, C loops and index expressions.

TTGIR (MLIR), TileLang's generated CUDA and CUDA sources all nest their regions in braces, so one
brace matcher serves the three; the C helpers read generated and hand-written CUDA alike.
"""

from __future__ import annotations

import re

__all__ = ["block", "quote", "at_line", "c_loops", "cuda_kernel_body", "index_expressions"]


def block(lines: list[str], start: int) -> list[str]:
    """``lines[start]`` and what follows up to the brace that closes the region it opens."""
    depth, opened = 0, False
    for end in range(start, len(lines)):
        for ch in lines[end]:
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:  # `} else {` closes the region on its line
                    return lines[start:end + 1]
    return lines[start:]


def quote(line: str, limit: int = 160) -> str:
    """An artifact line as evidence: trimmed, cut to ``limit`` characters."""
    text = " ".join(line.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def at_line(line: int | None) -> str:
    """The evidence prefix naming the candidate's line, or nothing when it is unknown."""
    return f"line {line}: " if line else ""


def cuda_kernel_body(source: str, name: str) -> list[str]:
    """Lines of the ``__global__`` function ``name`` in a CUDA source (its definition, not a declaration)."""
    lines = source.splitlines()
    for i, ln in enumerate(lines):
        if "__global__" in ln or (i and "__global__" in lines[i - 1]):
            if re.search(rf"\b{re.escape(name)}\s*\(", ln) and not ln.rstrip().endswith(";"):
                return block(lines, i)
    return []


def c_loops(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Each ``for`` loop: its header line and its body (braced block, or the one statement after it).

    Bodies are slices of ``lines``, so a line of a nested loop is the same object in both bodies."""
    loops = []
    for i, ln in enumerate(lines):
        m = re.match(r"\s*for\s*\(", ln)
        if not m:
            continue
        depth, j = 1, m.end()
        while j < len(ln) and depth:
            depth += {"(": 1, ")": -1}.get(ln[j], 0)
            j += 1
        tail = ln[j:].strip()
        if tail.startswith("{") or (not tail and i + 1 < len(lines) and lines[i + 1].strip().startswith("{")):
            loops.append((ln, block(lines, i if tail else i + 1)[1:] or [tail]))  # `{ ... }` on one line
        elif tail:
            loops.append((ln, [tail]))
        elif i + 1 < len(lines):
            loops.append((ln, [lines[i + 1]]))
    return loops


def index_expressions(line: str, pointer: str) -> list[str]:
    """Index expressions of ``pointer[...]`` and ``(pointer + ...)`` in a line (bracket-matched)."""
    found = []
    for m in re.finditer(rf"(?<![\w.]){re.escape(pointer)}\s*(\[|\+)", line):
        depth, start = 1, m.end()
        i = start
        while i < len(line) and depth:
            depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(line[i], 0)
            i += 1
        found.append(line[start:i - 1] if depth == 0 else line[start:])
    return found
