"""DESIGN.md's package table, executable: imports point down, pure rooms stay pure, sizes stay small.

    gateway/  ->  policies/ scheduler/ backends/  ->  kernels/

Every module's imports are read with `ast` (nothing is imported), including those under
`TYPE_CHECKING` and inside functions: a lazy import still couples the rooms. Installed, the rooms
are sub-packages of `fairgate`; the scan names them by their folder (`gateway.app`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "policies", "scheduler", "backends", "kernels", "migrations")
# package -> packages of ours it may import (itself always)
MAY_IMPORT: dict[str, frozenset[str]] = {
    "gateway": frozenset({"policies", "scheduler", "backends", "kernels", "migrations"}),  # "everything below"
    "policies": frozenset(),
    "scheduler": frozenset(),
    "backends": frozenset({"scheduler", "kernels"}),
    "kernels": frozenset(),
    "migrations": frozenset({"gateway"}),
}
# What scheduler/ and policies/ must never import: they test without a GPU, a database or a network
# (DESIGN: "scheduler/ must stay testable without torch, policies/ without a database or network").
SERVICES = frozenset({"torch", "triton", "starlette", "httpx", "sqlalchemy", "redis", "psycopg", "psycopg2",
                      "uvicorn"})
HEAVY = {"scheduler": SERVICES | {"numpy"}, "policies": SERVICES}  # plain Python planner; detectors may vectorise
PURE = ("scheduler", "policies")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
NO_FUNCTION_LIMIT = ("kernels", "migrations")


def modules() -> Iterator[tuple[str, Path]]:
    """(dotted name, path) of every module of our packages."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            yield ".".join(parts), path


def imported_modules(name: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute dotted module, `fairgate.` dropped) for every import statement in the module."""
    for line, module in _imports(name, path):
        yield line, module.removeprefix("fairgate.") if module != "fairgate" else module


def _imports(name: str, path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's own package
                base = package[: len(package) - node.level + 1]
                yield node.lineno, ".".join([*base, node.module] if node.module else base)
            elif node.module == "fairgate":  # from fairgate import kernels
                for alias in node.names:
                    yield node.lineno, f"fairgate.{alias.name}"
            elif node.module:
                yield node.lineno, node.module


def every_python_file() -> Iterator[Path]:
    """The rooms, and everything that imports them: tests, benchmarks, tools."""
    for folder in (*PACKAGES, "tests", "bench", "tools"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_every_import_of_a_room_goes_through_fairgate() -> None:
    # With the repository root on sys.path `import gateway` would still work here, and load a second
    # copy of every module it touches; installed, it fails (or finds someone else's `kernels`).
    bare = []
    for path in every_python_file():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            bare += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names if top(n) in PACKAGES]
    assert bare == []


def top(module: str) -> str:
    return module.split(".", 1)[0]


def test_the_scan_sees_every_room() -> None:
    found = {top(name) for name, _ in modules()}
    assert found == set(PACKAGES)
    edges = {(top(name), top(m)) for name, path in modules() for _, m in imported_modules(name, path)}
    # a scanner that misses imports would pass everything: these edges exist today
    assert {("gateway", "backends"), ("backends", "scheduler"), ("backends", "kernels")} <= edges


def test_imports_point_down_the_table() -> None:
    upward = []
    for name, path in modules():
        room = top(name)
        for line, module in imported_modules(name, path):
            target = top(module)
            if target in MAY_IMPORT and target != room and target not in MAY_IMPORT[room]:
                upward.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert upward == []


@pytest.mark.parametrize("room", PURE)
def test_pure_rooms_import_no_heavy_library(room: str) -> None:
    heavy = []
    for name, path in modules():
        if top(name) != room:
            continue
        for line, module in imported_modules(name, path):
            if top(module) in HEAVY[room]:
                heavy.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert heavy == []


def in_rooms(path: Path, rooms: tuple[str, ...]) -> bool:
    """Whether `path` lies under one of `rooms` (folders relative to the root, e.g. "backends/local")."""
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == room or rel.startswith(room + "/") for room in rooms)


def long_modules(rooms: tuple[str, ...] = PACKAGES) -> list[str]:
    out = []
    for _, path in modules():
        if in_rooms(path, rooms):
            n = len(path.read_text().splitlines())
            if n > MAX_MODULE_LINES:
                out.append(f"{path.relative_to(ROOT)} ({n} lines)")
    return out


def long_functions(rooms: tuple[str, ...] = PACKAGES) -> list[str]:
    out = []
    for name, path in modules():
        if not in_rooms(path, rooms) or top(name) in NO_FUNCTION_LIMIT:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1 if node.end_lineno else 0
                if n > MAX_FUNCTION_LINES:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    return out


# The engine's own rooms in backends/local (its HTTP front door, serving/, is gateway-side work).
ENGINE_ROOMS = ("backends/local/engine", "backends/local/kv_cache", "backends/local/model",
                "backends/local/sampling/sampler.py")
MAX_MODULES_PER_FOLDER = 30  # a screenful: past it a folder is several rooms


def test_engine_and_pure_rooms_keep_modules_and_functions_small() -> None:
    # Strict where the rooms are already small: the engine, the scheduler, the policies.
    rooms = ("scheduler", "policies", *ENGINE_ROOMS)
    assert long_modules((*rooms, "kernels")) == []
    assert long_functions(rooms) == []


def test_no_function_over_60_lines_outside_kernels_and_migrations() -> None:
    assert long_functions() == []


def test_no_module_over_400_lines() -> None:
    assert long_modules() == []


def test_every_folder_is_a_screenful() -> None:
    # A newcomer finds a concern from the folder names: a folder past a screenful of modules is
    # several rooms side by side, and gets sub-packages named by concern.
    crowded = []
    for package in PACKAGES:
        for folder in [ROOT / package, *(p.parent for p in (ROOT / package).rglob("*/__init__.py"))]:
            n = len(list(folder.glob("*.py")))
            if n > MAX_MODULES_PER_FOLDER:
                crowded.append(f"{folder.relative_to(ROOT)} ({n} modules)")
    assert crowded == []


def test_gateway_rooms_see_only_their_part_of_the_state() -> None:
    # GatewayState is the composition root's (gateway/app.py builds it); a room's modules read
    # it through the Protocol in the room's own state.py, which alone names gateway.state.
    reaching = []
    for path in sorted((ROOT / "gateway").glob("*/*.py")):
        if path.name == "state.py":
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        for line, module in imported_modules(".".join(rel.parts), path):
            if module == "gateway.state":
                reaching.append(f"{rel}.py:{line}")
    assert reaching == []
