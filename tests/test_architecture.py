"""The house rules, read from the code: every import of the package (module level or inside a
function) runs one way between the wings, and no modules import each other in a loop.

    cli -> render -> track -> results <- bench -> kernels      (each wing may use the shared modules)

``kernels`` imports nothing of the package but the shared modules: it is what an inference engine
could vendor. docs/design.md draws the same picture.
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hisparse"
SHARED = {"env", "errors", "stats", "files", "gitutil"}
# wing -> the wings it may import (besides itself and the shared modules)
ALLOWED = {
    "kernels": set(),
    "results": set(),
    "bench": {"kernels", "results"},
    "track": {"results"},
    "render": {"track", "results"},
    "cli": {"render", "track", "results", "bench", "kernels"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every hisparse module ``path`` imports, resolved to a module that exists."""
    tree = ast.parse(path.read_text(), filename=str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import name`: the submodule pkg.name where there is one, else pkg itself
            names = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name == "hisparse" or name.startswith("hisparse."):
                found.add(resolve(name))
    found.discard(me)
    return found


def resolve(name: str) -> str:
    """The longest prefix of ``name`` that is a module or package of the tree."""
    parts = name.split(".")
    while parts:
        p = PKG.parent.joinpath(*parts)
        if p.with_suffix(".py").is_file() or (p / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return name


def wing(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] == "__main__":
        return None  # hisparse itself (the public API) or __main__
    return parts[1]


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PKG.rglob("*.py")}


def test_every_module_belongs_to_a_wing_or_is_shared():
    strays = sorted(m for m in graph() if wing(m) not in ALLOWED and wing(m) not in SHARED
                    and m not in ("hisparse", "hisparse.__main__"))
    assert strays == []


def test_imports_run_one_way_between_wings():
    bad = []
    for src, targets in graph().items():
        w = wing(src)
        if w is None:
            continue
        for dst in targets:
            v = wing(dst)
            if v is None:
                bad.append(f"{src} -> {dst} (the public API is for users, not for the wings)")
            elif w in SHARED:
                if v not in SHARED:
                    bad.append(f"{src} -> {dst} (a shared module imports no wing)")
            elif v != w and v not in SHARED and v not in ALLOWED[w]:
                bad.append(f"{src} -> {dst}")
    assert bad == [], "imports against the wing rule:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
    g = graph()
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if n not in g:
                continue
            if state.get(n) == 1:
                cycles.append(" -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    assert cycles == []


def test_the_rule_reader_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    # A control: the checks above would pass vacuously if imports_of missed these forms.
    fake = tmp_path / "hisparse"
    (fake / "kernels").mkdir(parents=True)
    (fake / "bench").mkdir()
    for p in (fake / "__init__.py", fake / "kernels" / "__init__.py", fake / "bench" / "__init__.py",
              fake / "bench" / "case.py"):
        p.write_text("")
    (fake / "kernels" / "x.py").write_text("def f():\n    from ..bench import case\n    import hisparse.bench.case\n")
    monkeypatch.setattr(__import__(__name__), "PKG", fake)
    assert imports_of(fake / "kernels" / "x.py") == {"hisparse.bench.case"}


def test_the_public_api_resolves_and_import_hisparse_stays_light():
    import subprocess
    import sys

    import hisparse

    for name in hisparse.__all__:
        assert getattr(hisparse, name) is not None, name
    code = "import sys, hisparse; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_comments_cite_the_semantics_in_the_repo():
    # The kernel semantics and platform facts the code relies on live in docs/semantics.md (sections
    # kept from the document they came from); a citation of a file outside the repo helps no reader.
    import re

    root = PKG.parent
    pattern = re.compile(r"[Rr]eference doc\b|harness\.md")
    found = []
    for folder in ("hisparse", "csrc", "tests", "scripts", "benchmarks", "ci", "configs", "plugins"):
        for path in (root / folder).rglob("*"):
            if path.suffix in (".py", ".cuh", ".h", ".sh", ".yaml", ".md") and path.name != "test_architecture.py":
                found += [f"{path.relative_to(root)}:{i}" for i, line in enumerate(path.read_text().splitlines(), 1)
                          if pattern.search(line)]
    assert found == []
