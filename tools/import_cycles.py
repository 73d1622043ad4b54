"""Find import cycles among sibling modules, in the Rust engine and in the Python package.

At every level of the tree (the crate's top modules; the files of `store/`; the modules of the Python
package and of its subpackages) a module depends on a sibling when any file under it names anything
under that sibling: `use super::x`, `crate::a::b` anywhere in the code, `from .x import y`, `import
cubeslab.x`, function-local imports included. Names re-exported by a parent (`pub use x::Y`,
`from .x import Y` in `__init__.py`) count as the module that defines them. Each group of siblings
that depend on one another in a ring is printed; the exit status is 1 if there is any.

Usage: python tools/import_cycles.py [RUST_SRC] [PYTHON_PACKAGE]
(defaults: crates/cubeslab-core/src and python/cubeslab)
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

Module = tuple[str, ...]

# -- Rust ------------------------------------------------------------------------------------------


def rust_modules(src: Path) -> dict[Module, Path]:
    """Module path -> its file, for a crate rooted at src/lib.rs."""
    modules: dict[Module, Path] = {}
    for file in src.rglob("*.rs"):
        parts = file.relative_to(src).with_suffix("").parts
        if parts in (("lib",), ("main",)):
            modules[()] = file
        elif parts[-1] == "mod":
            modules[parts[:-1]] = file
        else:
            modules[parts] = file
    return modules


def strip_rust_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)  # strings may hold `crate::` in messages
    return re.sub(r"//[^\n]*", "", text)


def expand_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree.split(" as ")[0].strip()] if tree else []
    prefix, body = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [prefix + p for part in parts for p in expand_use_tree(part) if part.strip()]


def rust_paths(text: str) -> list[tuple[str, bool]]:
    """Every crate-internal path named in `text`, and whether it is a `pub use` re-export."""
    text = strip_rust_comments(text)
    found = []
    for match in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
        for path in expand_use_tree(match.group(2)):
            found.append((path, bool(match.group(1))))
    body = re.sub(r"\buse\s+[^;]+;", "", text)
    found += [(m.group(0), False) for m in re.finditer(r"\b(?:crate|super|self)(?:::\w+)+", body)]
    return found


def resolve_rust(path: str, here: Module, modules: dict, exports: dict) -> Module | None:
    """The module a path names (following re-exports), or None for other crates and std."""
    parts = path.split("::")
    if parts[0] == "crate":
        base: Module = ()
        parts = parts[1:]
    elif parts[0] in ("self", "super"):
        base = here
        while parts and parts[0] in ("self", "super"):
            base = base[:-1] if parts[0] == "super" else base
            parts = parts[1:]
    elif (*here, parts[0]) in modules:  # a child module named directly
        base = here
    else:
        return None
    module = base
    for name in parts:
        if (*module, name) in modules:
            module = (*module, name)
        elif name in exports.get(module, {}):
            return exports[module][name]
        else:
            break
    return module


def rust_graph(src: Path) -> dict[Module, set[Module]]:
    modules = rust_modules(src)
    texts = {m: f.read_text() for m, f in modules.items()}
    exports: dict[Module, dict[str, Module]] = defaultdict(dict)
    for _ in range(3):  # re-exports of re-exports
        for m, text in texts.items():
            for path, public in rust_paths(text):
                if not public:
                    continue
                target = resolve_rust(path, m, modules, exports)
                if target is not None and target != m:
                    exports[m][path.split("::")[-1].split(" as ")[-1]] = target
    graph: dict[Module, set[Module]] = defaultdict(set)
    for m, text in texts.items():
        for path, _ in rust_paths(text):
            target = resolve_rust(path, m, modules, exports)
            if target is not None and target != m:
                graph[m].add(target)
    return graph


# -- Python ----------------------------------------------------------------------------------------


def python_modules(package: Path) -> dict[Module, Path]:
    root = package.name
    modules: dict[Module, Path] = {}
    for file in package.rglob("*.py"):
        parts = (root, *file.relative_to(package).with_suffix("").parts)
        modules[parts[:-1] if parts[-1] == "__init__" else parts] = file
    return modules


def python_graph(package: Path) -> dict[Module, set[Module]]:
    modules = python_modules(package)

    def longest(parts: Module) -> Module:
        while parts and parts not in modules:
            parts = parts[:-1]
        return parts

    graph: dict[Module, set[Module]] = defaultdict(set)
    for m, file in modules.items():
        package_of = m if file.name == "__init__.py" else m[:-1]
        for node in ast.walk(ast.parse(file.read_text())):
            targets: list[Module] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package_of[: len(package_of) - node.level + 1]
                    base = base + tuple(node.module.split(".")) if node.module else base
                elif node.module and node.module.split(".")[0] == m[0]:
                    base = tuple(node.module.split("."))
                else:
                    continue
                for alias in node.names:
                    targets.append(longest((*base, alias.name)))
            elif isinstance(node, ast.Import):
                names = [tuple(a.name.split(".")) for a in node.names]
                targets += [longest(n) for n in names if n[0] == m[0]]
            graph[m].update(t for t in targets if t and t != m)
    return graph


# -- cycles among siblings -------------------------------------------------------------------------


def sibling_cycles(graph: dict[Module, set[Module]]) -> list[list[Module]]:
    """Rings of siblings: for each parent, the strongly connected groups of its children, where a
    child depends on another when anything under it depends on anything under the other."""
    edges: dict[Module, set[Module]] = defaultdict(set)
    for source, targets in graph.items():
        for target in targets:
            # The siblings under the deepest common parent of the two modules.
            common = 0
            while common < min(len(source), len(target)) and source[common] == target[common]:
                common += 1
            if common < len(source) and common < len(target):
                edges[source[: common + 1]].add(target[: common + 1])
    # Tarjan's strongly connected components.
    index: dict[Module, int] = {}
    low: dict[Module, int] = {}
    stack: list[Module] = []
    on_stack: set[Module] = set()
    rings: list[list[Module]] = []

    def visit(v: Module) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                rings.append(sorted(group))

    for v in list(edges):
        if v not in index:
            visit(v)
    return sorted(rings)


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    rust = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "crates/cubeslab-core/src"
    python = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "python/cubeslab"
    found = 0
    for kind, graph, sep in (("rust", rust_graph(rust), "::"), ("python", python_graph(python), ".")):
        for ring in sibling_cycles(graph):
            found += 1
            print(f"{kind} cycle: " + " <-> ".join(sep.join(m) or "crate" for m in ring))
    if not found:
        print("no import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
