"""The layering rules of docs/ARCHITECTURE.md, enforced on the source tree.

The packages are read as source (their imports parsed, not executed), so a rule broken by an
import inside a function is caught as well as one at the top of a module. Imports under
``if TYPE_CHECKING:`` are left out: they never run. One rule needs a real interpreter: that
the Flask-free packages really load no Flask, which a fresh subprocess checks.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Each installed package and the folder it is built from (pyproject.toml's package-dir).
PACKAGE_FOLDERS = {
    "payhooks.console": ROOT / "console",
    "payhooks.receiver": ROOT / "receiver",
    "payhooks.verify": ROOT / "verify",
    "payhooks.storage": ROOT / "storage",
}
for _name, _folder in {"payhooks.service": ROOT / "service"}.items():
    if _folder.is_dir():
        PACKAGE_FOLDERS[_name] = _folder

#: The longest module the style allows ("a few hundred lines at most"), with some slack.
MAX_MODULE_LINES = 450

#: Packages that must load without Flask (or werkzeug): usable from a worker, a script or
#: another framework.
FLASK_FREE = [
    "payhooks.verify",
    "payhooks.storage",
    "payhooks.receiver.payloads",
    "payhooks.receiver.pipeline",
    "payhooks.receiver.settings",
]

#: The layers, lowest first: a module may import its own layer and the layers below it, never
#: one above. Keys are module-name prefixes; the longest matching prefix decides.
LAYERS: dict[str, int] = {
    "payhooks.verify": 0,
    "payhooks.storage": 0,
    "payhooks.service": 1,
    "payhooks.receiver.payloads": 2,
    "payhooks.receiver.config": 2,
    "payhooks.receiver.redirects": 2,
    "payhooks.receiver.signals": 2,
    "payhooks.receiver.ledgers": 2,
    "payhooks.receiver.testing": 2,
    "payhooks.receiver.visible_text": 2,
    "payhooks.receiver.report_csv": 2,
    "payhooks.receiver.durations": 2,
    "payhooks.receiver.signal_retries": 2,
    "payhooks.receiver.settings": 3,
    "payhooks.receiver.pipeline": 4,
    "payhooks.receiver.state": 5,
    "payhooks.receiver.checks": 5,
    "payhooks.receiver.web": 6,
    "payhooks.receiver.cli": 6,
    "payhooks.receiver.extension": 7,
    "payhooks.receiver.demo": 8,
    "payhooks.receiver.script": 9,
    "payhooks.receiver.__main__": 10,
    # The package's __init__ imports nothing at load time (PEP 562); it may name any layer.
    "payhooks.receiver": 10,
    # The console sits above the whole receiver: nothing below it imports it (the payhooks
    # script finds its command through an entry point), and its stand-alone app above it.
    "payhooks.console": 11,
    "payhooks.console.standalone": 12,
}

#: The receiver's modules the console may use beyond the receiver's face: the parts its pages and
#: its stand-alone command share with the receiver's own (the ledger pools, the settings and the
#: per-app state, text made visible, the CSV line, what a body names, the commands' options).
#: None is a merchant's name, so none is in ``payhooks.receiver``'s face; every other module of
#: the receiver stays private to it.
CONSOLE_BUILDS_ON = frozenset(
    {
        "payhooks.receiver.ledgers",
        "payhooks.receiver.settings",
        "payhooks.receiver.state",
        "payhooks.receiver.visible_text",
        "payhooks.receiver.report_csv",
        "payhooks.receiver.payloads.named",
        "payhooks.receiver.cli.common",
    }
)

#: Pairs of packages that must not know each other even though neither is above the other.
INDEPENDENT = [
    ("payhooks.verify", "payhooks.storage"),
    ("payhooks.receiver.web", "payhooks.receiver.cli"),
]


def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            found[_module_name(package, folder, path)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str) -> str | None:
    """The most specific project module ``name`` refers to (a module, or a name in one)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str) -> set[str]:
    """The project modules ``module`` imports, not their parent packages: importing
    ``payhooks.receiver.web.errors`` is an edge to that module, not to its package."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            resolved = _resolve(target)
            if resolved is not None and resolved != module:
                found.add(resolved)
    return found


def _layer(module: str) -> int:
    matches = [prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return LAYERS[max(matches, key=len)]


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        _layer(module)


def test_imports_point_down() -> None:
    upward = [
        f"{module} -> {target}"
        for module in MODULES
        for target in imports_of(module)
        if _layer(target) > _layer(module)
    ]
    assert upward == []


@pytest.mark.parametrize(("one", "other"), INDEPENDENT)
def test_independent_packages_do_not_import_each_other(one: str, other: str) -> None:
    crossing = [
        f"{module} -> {target}"
        for module in MODULES
        for target in imports_of(module)
        if (_in(module, one) and _in(target, other)) or (_in(module, other) and _in(target, one))
    ]
    assert crossing == []


def test_no_package_reaches_into_another_packages_private_modules() -> None:
    """Between the installed packages, only a package (its ``__init__`` exports) is imported:
    ``from payhooks.storage import Ledger`` or ``from payhooks.service.client import
    ServiceClient``, never a module file such as ``payhooks.storage.ledger``; the console also
    the receiver's modules of :data:`CONSOLE_BUILDS_ON`."""
    tops = sorted(PACKAGE_FOLDERS)
    reaching = []
    for module in MODULES:
        home = next(top for top in tops if _in(module, top))
        for target in imports_of(module):
            other = next(top for top in tops if _in(target, top))
            if home == "payhooks.console" and target in CONSOLE_BUILDS_ON:
                continue
            if other != home and MODULES[target].name != "__init__.py":
                reaching.append(f"{module} -> {target}")
    assert reaching == []


def test_the_console_builds_on_receiver_modules_that_exist() -> None:
    """A module renamed or moved out of the receiver leaves no stale permit behind."""
    assert sorted(CONSOLE_BUILDS_ON - set(MODULES)) == []


def test_nothing_below_the_console_imports_it() -> None:
    """The console sits above the whole receiver: no module of the receiver (its script
    included, which finds ``payhooks console`` through an entry point), the storage, the service
    or verify imports it, at the top of a module or inside a function."""
    below = [
        f"{module} -> {target}"
        for module in MODULES
        if not _in(module, "payhooks.console")
        for target in imports_of(module)
        if _in(target, "payhooks.console")
    ]
    assert below == []


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    return components


def test_no_import_cycles() -> None:
    graph = {module: sorted(imports_of(module)) for module in MODULES}
    assert _cycles(graph) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_over_450_lines(module: str) -> None:
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{MODULES[module]} has {lines} lines"


def test_no_module_is_named_like_an_attribute_of_its_package() -> None:
    """``payhooks.receiver.blueprint`` was both a module and the blueprint object: whichever
    was imported last won. A package's exports must not reuse a submodule's name."""
    clashes = []
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        exported = _all_of(tree)
        submodules = {name.rpartition(".")[2] for name in MODULES if name.startswith(module + ".")}
        clashes += [f"{module}.{name}" for name in exported & submodules if name != "signals"]
    assert clashes == []


def _all_of(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            value = ast.literal_eval(node.value)
            return set(value)
    return set()


@pytest.mark.parametrize("module", FLASK_FREE)
def test_flask_free_packages_load_no_flask(module: str) -> None:
    """Checked in a fresh interpreter: this test process has long since imported Flask."""
    code = (
        f"import sys, {module}\n"
        "loaded = sorted(m for m in ('flask', 'werkzeug', 'jinja2') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""


def test_the_cycle_finder_finds_the_cycle_this_layout_once_had() -> None:
    """extension -> cli -> cli_server -> demo_run -> extension, as before the split."""
    graph = {
        "extension": ["cli", "state"],
        "cli": ["cli_server"],
        "cli_server": ["demo_run"],
        "demo_run": ["extension"],
        "state": [],
    }
    assert _cycles(graph) == [["cli", "cli_server", "demo_run", "extension"]]


def test_an_upward_import_is_above_its_importer() -> None:
    """The layer numbers order what the rules say: the console script above the pipeline, the
    console above the whole receiver, its stand-alone app above it."""
    assert _layer("payhooks.receiver.script") > _layer("payhooks.receiver.pipeline.processing")
    assert _layer("payhooks.receiver.web.routes") > _layer("payhooks.receiver.pipeline")
    receiver = [module for module in MODULES if _in(module, "payhooks.receiver")]
    assert _layer("payhooks.console.pages") > max(_layer(module) for module in receiver)
    assert _layer("payhooks.console.standalone.app") > _layer("payhooks.console.mount")
