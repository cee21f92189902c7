"""hisparse/kernels/limits.py against the C++ sources: each limit the entries and device headers check
is read from the .cuh text and held to its Python value, with controls showing a planted change is
caught. No GPU or compiler needed."""
from __future__ import annotations

import ast
import operator
import re
from pathlib import Path

import pytest

from hisparse.kernels import limits

CSRC = Path(__file__).resolve().parents[2] / "csrc"

# (file under csrc, C++ constant, name in limits.py)
CONSTANTS = [
    ("swap_multi.cuh", "kMaxSteps", "MAX_STEPS"),
    ("swap_multi.cuh", "kMaxOccurrences", "MAX_STEPS_X_TOP_K"),
    ("swap_multi.cuh", "kMaxHot", "MAX_HOT_BUFFER_SIZE"),
    ("swap_multi.cuh", "kMaxMissTable", "MAX_MISS_TABLE"),
    ("swap_multi.cuh", "kMaxItemBytes", "MAX_ITEM_SIZE_BYTES"),
    ("include/hisparse/spec_common.cuh", "kMaxKicks", "MAX_KICKS"),
    ("include/hisparse/gather.cuh", "kGatherMaxBlock", "MAX_GATHER_BLOCK_SIZE"),
]

# Limits written as literals inside an entry's checks: (file, regex whose group 1 is the bound, limits name).
LITERALS = [
    ("swap_single.cuh", r"HOT <= (\d+)\)", "MAX_LRU_HOT_BUFFER_SIZE"),
    ("swap_multi.cuh", r"bs <= (\(int64_t\{1\} << \d+\))", "MAX_MULTI_BATCH"),
    ("swap_multi.cuh", r"host_cache_locs\.size\(1\) <= (\(int64_t\{1\} << \d+\))", "MAX_TOKEN_POSITIONS"),
    ("host/entry_checks.h", r"item_size_bytes <= (0x[0-9A-Fa-f]+)\)", "MAX_COPY_ITEM_SIZE_BYTES"),
    ("copy_planned.cuh", r"num_blocks <= (\d+)\)", "MAX_GRID_BLOCKS"),
    ("gather_floor.cuh", r"num_blocks <= (\d+)\)", "MAX_GRID_BLOCKS"),
]

_OPS = {ast.LShift: operator.lshift, ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub}


def cpp_int(expr: str) -> int:
    """Value of a C++ integer constant expression of literals, << * + - (``int64_t{1}`` is 1)."""
    text = re.sub(r"\bu?int(?:32|64)_t\{(\w+)\}", r"\1", expr.strip()).rstrip("uUlL")

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"not a constant integer expression: {expr!r}")

    return value(ast.parse(text, mode="eval").body)


def cpp_constant(source: str, name: str) -> int:
    m = re.search(rf"constexpr\s+\w+\s+{name}\s*=\s*([^;]+);", source)
    assert m, f"no constexpr {name} in the source"
    return cpp_int(m.group(1))


def constant_mismatches(sources: dict[str, str]) -> list[str]:
    out = []
    for path, cpp, py in CONSTANTS:
        got = cpp_constant(sources[path], cpp)
        if got != getattr(limits, py):
            out.append(f"{cpp} = {got} in csrc/{path}, limits.{py} = {getattr(limits, py)}")
    return out


def literal_mismatches(sources: dict[str, str]) -> list[str]:
    out = []
    for path, pattern, py in LITERALS:
        found = re.findall(pattern, sources[path])
        assert found, f"csrc/{path}: no match for {pattern!r} (the check moved? update this table)"
        for text in found:
            if cpp_int(text) != getattr(limits, py):
                out.append(f"{text} in csrc/{path}, limits.{py} = {getattr(limits, py)}")
    return out


def _sources() -> dict[str, str]:
    paths = {p for p, _, _ in CONSTANTS} | {p for p, _, _ in LITERALS}
    return {p: (CSRC / p).read_text() for p in paths}


def test_cpp_int_reads_the_forms_csrc_uses():
    assert cpp_int("int64_t{1} << 20") == 1 << 20
    assert cpp_int("(int64_t{1} << 24)") == 16777216
    assert cpp_int("0x7FFFFFFF") == 2147483647
    assert cpp_int("8192") == 8192
    with pytest.raises(ValueError):
        cpp_int("kMaxHot / 2")


def test_cpp_constants_equal_limits():
    assert constant_mismatches(_sources()) == []


def test_cpp_literal_bounds_equal_limits():
    assert literal_mismatches(_sources()) == []


def test_the_single_step_limit_is_the_int16_maximum():
    torch = pytest.importorskip("torch")
    assert limits.MAX_LRU_HOT_BUFFER_SIZE == torch.iinfo(torch.int16).max


def test_control_a_changed_cpp_constant_is_caught():
    sources = _sources()
    sources["swap_multi.cuh"] = sources["swap_multi.cuh"].replace("kMaxSteps = 4;", "kMaxSteps = 5;")
    assert constant_mismatches(sources) == ["kMaxSteps = 5 in csrc/swap_multi.cuh, limits.MAX_STEPS = 4"]


def test_control_a_changed_cpp_literal_is_caught():
    sources = _sources()
    sources["swap_single.cuh"] = sources["swap_single.cuh"].replace("HOT <= 32767)", "HOT <= 32768)")
    assert literal_mismatches(sources) == ["32768 in csrc/swap_single.cuh, limits.MAX_LRU_HOT_BUFFER_SIZE = 32767"]


def test_every_max_constant_of_csrc_is_held_here():
    held = {(p, c) for p, c, _ in CONSTANTS}
    for path in sorted(CSRC.rglob("*.cu*")) + sorted(CSRC.rglob("*.h")):
        rel = path.relative_to(CSRC).as_posix()
        for name in re.findall(r"constexpr\s+\w+\s+(k\w*Max\w*)\s*=", path.read_text()):
            assert (rel, name) in held, f"csrc/{rel}: {name} has no entry in limits.py / CONSTANTS"


# Module-level names in hisparse/kernels that look like limits but are not kernel sizes.
NOT_KERNEL_LIMITS = {
    "reference/violation.py": {"MAX_ENTRIES_PER_REQUEST"},  # how many violations a report keeps per request
}


def test_no_limit_is_defined_outside_limits_py():
    root = Path(limits.__file__).parent
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "limits.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.Assign) or not isinstance(node.value, (ast.Constant, ast.BinOp)):
                continue  # an alias (X = limits.X) or a computed value is fine
            for target in node.targets:
                name = getattr(target, "id", "")
                if re.match(r"_?(MAX|MIN)_", name) and name not in NOT_KERNEL_LIMITS.get(rel, set()):
                    pytest.fail(f"hisparse/kernels/{rel}: {name} is a literal limit; define it in limits.py")
