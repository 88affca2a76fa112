"""The boundaries between the course's packages, read from their imports.

    course/*.py      the runtime, what notebooks import: imports only the runtime
    course/spec/     what a unit is (units, regions, lessons, questions, mutants): the runtime
                     and itself
    course/authoring the instructors' tools: never the grader
    autograder/      the grader: never the authoring tools

and no circle of imports between modules anywhere. Every import counts, those inside
functions too: a deferred import is still a dependency.
"""

import ast
import os
import re
import sys
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("course", "autograder")

# (layer of the importer, layers it may import)
ALLOWED = {
    "runtime": {"runtime"},
    "spec": {"runtime", "spec"},
    "authoring": {"runtime", "spec", "authoring"},
    "autograder": {"runtime", "spec", "autograder"},
}


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "autograder":
        return "autograder"
    if len(parts) > 1 and parts[1] in ("spec", "authoring"):
        return parts[1]
    return "runtime"


def modules(root: str) -> dict[str, str]:
    """{dotted module name: path} of every module in the packages under `root`; folders that are
    not packages (autograder/hostile's attacks) are left out."""
    found = {}
    for package in PACKAGES:
        for folder, subfolders, names in os.walk(os.path.join(root, package)):
            if "__init__.py" not in names:
                subfolders[:] = []
                continue
            dotted = os.path.relpath(folder, root).replace(os.sep, ".")
            for name in names:
                if name.endswith(".py"):
                    module = dotted if name == "__init__.py" else f"{dotted}.{name[:-3]}"
                    found[module] = os.path.join(folder, name)
    return found


def _trees(root: str):
    """(module, its parsed source, whether it is a package's __init__) of every module."""
    for module, path in modules(root).items():
        with open(path, encoding="utf-8") as handle:
            yield module, ast.parse(handle.read(), path), path.endswith("__init__.py")


def _targets(node, importer: str, is_package: bool, known) -> set[str]:
    """The modules of the packages an import statement loads: for `import X`, X; for
    `from X import y`, the module X.y where there is one, else X (y is a name defined there)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & known
    base = node.module or ""
    if node.level:  # relative to the importer's package
        anchor = importer.split(".")
        anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
        base = ".".join(anchor + ([base] if base else []))
    return {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names} & known


def edges(root: str) -> dict[str, set[str]]:
    """{module: the modules of the packages it imports}, from every import statement in it."""
    known = set(modules(root))
    graph = {}
    for module, tree, is_package in _trees(root):
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets |= _targets(node, module, is_package, known)
        graph[module] = targets - {module}
    return graph


def private_imports(root: str) -> list[str]:
    """`from X import _y` where X is a module of the packages: a private name used outside its
    module is part of an interface that does not say so."""
    found = []
    for module, tree, _ in _trees(root):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES):
                found += [
                    f"{module}: from {'.' * node.level}{node.module or ''} import {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                ]
    return sorted(found)


def forbidden(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} -> {target} ({layer(source)} may import only {', '.join(sorted(ALLOWED[layer(source)]))})"
        for source, targets in graph.items()
        for target in targets
        if layer(target) not in ALLOWED[layer(source)]
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each group of modules that reach each other (Tarjan's components)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle(graph, group) for group in groups]


def _circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A path from the group's first module back to itself, inside the group (breadth first)."""
    start = min(group)
    came_from = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & group):
            if target == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, node, start]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise AssertionError(f"no circle through {sorted(group)}")


# pyproject.toml's dependencies by the name a module imports them under (None: a tool, never imported).
IMPORT_NAMES = {"pyyaml": "yaml", "ninja": None}


def declared(root: str) -> set[str]:
    """The modules pyproject.toml's dependencies install."""
    with open(os.path.join(root, "pyproject.toml"), "rb") as handle:
        requirements = tomllib.load(handle)["project"]["dependencies"]
    names = {re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower() for requirement in requirements}
    return {IMPORT_NAMES.get(name, name) for name in names} - {None}


def _guarded(tree) -> set[int]:
    """ids of the import statements inside a `try` whose handlers catch a missing module."""
    catches = {"ImportError", "ModuleNotFoundError", "Exception"}
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            handler.type is None or {n.id for n in ast.walk(handler.type) if isinstance(n, ast.Name)} & catches
            for handler in node.handlers
        ):
            guarded |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return guarded


def undeclared_imports(root: str) -> list[str]:
    """Modules the packages import, outside the standard library and the packages themselves,
    that pyproject.toml does not install, unless the import may fail (Colab's google.colab,
    matplotlib's plots): a grader installed from the wheel alone would stop at them. The
    Gradescope test's environment sees the machine's packages, so it cannot show this."""
    allowed = set(sys.stdlib_module_names) | {"__main__"} | set(PACKAGES) | declared(root)
    found = []
    for module, tree, _ in _trees(root):
        guarded = _guarded(tree)
        for node in ast.walk(tree):
            if id(node) in guarded or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            found += [f"{module}: {name}" for name in names if name.split(".")[0] not in allowed]
    return sorted(found)


def test_every_module_imported_is_installed_with_the_package():
    assert undeclared_imports(REPO) == []


def test_the_dependency_check_finds_an_undeclared_import(tmp_path):
    with open(os.path.join(REPO, "pyproject.toml")) as handle:
        (tmp_path / "pyproject.toml").write_text(handle.read())
    _write(
        tmp_path,
        {
            "course/__init__.py": "import yaml\nimport torch.nn\n",
            "autograder/__init__.py": "",
            "autograder/plot.py": "def f():\n    import requests\ntry:\n    import matplotlib\nexcept ImportError:\n    pass\n",
        },
    )
    assert undeclared_imports(str(tmp_path)) == ["autograder.plot: requests"]


def test_no_import_crosses_a_boundary():
    crossed = forbidden(edges(REPO))
    assert not crossed, "imports that cross a boundary:\n" + "\n".join(crossed)


def test_no_circle_of_imports():
    found = cycles(edges(REPO))
    assert not found, "circles of imports:\n" + "\n".join(" -> ".join(circle) for circle in found)


def test_no_private_name_is_imported():
    found = private_imports(REPO)
    assert not found, "private names imported from another module (make them public):\n" + "\n".join(found)


def _write(root, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_the_checks_find_a_circle_and_a_crossing_inside_functions(tmp_path):
    _write(
        tmp_path,
        {
            "course/__init__.py": "",
            "course/harness.py": "def f():\n    from course.spec import units\n",
            "course/spec/__init__.py": "",
            "course/spec/units.py": "from .. import harness\nfrom ..harness import _time\n",
            "autograder/__init__.py": "",
            "autograder/grade.py": "import os\nfrom course.authoring.generate import main\n",
            "autograder/report.py": "from autograder import grade, LIMIT\n",
            "course/authoring/__init__.py": "",
            "course/authoring/generate.py": "def main():\n    from autograder import grade\n",
        },
    )
    graph = edges(str(tmp_path))
    assert graph["course.spec.units"] == {"course.harness"}
    assert graph["autograder.report"] == {"autograder", "autograder.grade"}
    assert [line.split(" (")[0] for line in forbidden(graph)] == [
        "autograder.grade -> course.authoring.generate",
        "course.authoring.generate -> autograder.grade",
        "course.harness -> course.spec.units",
    ]
    assert sorted(cycles(graph)) == [
        ["autograder.grade", "course.authoring.generate", "autograder.grade"],
        ["course.harness", "course.spec.units", "course.harness"],
    ]
    assert private_imports(str(tmp_path)) == ["course.spec.units: from ..harness import _time"]
