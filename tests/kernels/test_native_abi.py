"""kernels/native/abi.py: the one boundary to the native CPU kernels. Every entry point it declares
is the C definition (names, order, types); the constants and struct sizes the libraries export
match its mirrors, and a mismatch is a clear error; LANES and the vector types are defined once."""

from __future__ import annotations

import ctypes
import re

import pytest

from fairgate.kernels.native import abi, build

ROOT = build.FOLDER.parents[1]  # the repository root: kernels/native/ is FOLDER
DEFINITION = re.compile(r"^(int|void|size_t)\s+(\w+)\s*\(([^)]*)\)\s*\{", re.M)
C_TYPES = {"int": abi.I32, "int64_t": abi.I64, "float": abi.F32, "double": abi.F64, "size_t": abi.SIZE}


def c_definitions(source: str) -> dict[str, tuple[type | None, list[tuple[str, type]]]]:
    """{name: (return type, [(parameter, ctypes type)])} of a C file's exported functions."""
    out = {}
    for returns, name, params in DEFINITION.findall(source):
        typed = []
        for param in (p.strip() for p in params.replace("\n", " ").split(",")):
            if param in ("", "void"):
                continue
            words = re.findall(r"\w+", param)
            typed.append((words[-1], abi.P if "*" in param else C_TYPES[words[-2]]))
        out[name] = (None if returns == "void" else C_TYPES[returns], typed)
    return out


@pytest.mark.parametrize("spec", abi.LIBRARIES, ids=lambda spec: spec.source)
def test_every_entry_point_is_declared_as_c_defines_it(spec: abi.Library) -> None:
    defined = c_definitions((build.FOLDER / spec.source).read_text())
    for entry in spec.entries:
        returns, params = defined[entry.name]
        assert (entry.returns, list(entry.params)) == (returns, params), entry.name
    for name, _ in spec.structs:
        assert defined[name] == (abi.SIZE, [])


@pytest.mark.parametrize("spec", abi.LIBRARIES, ids=lambda spec: spec.source)
def test_every_library_agrees_with_its_mirrors(spec: abi.Library) -> None:
    if build.compiler() is None:
        pytest.skip("no C compiler here")
    lib = abi.open_library(spec)  # checks the constants and the struct sizes
    for name, mirror in spec.structs:
        assert getattr(lib, name)() == ctypes.sizeof(mirror)


def test_a_struct_that_differs_from_its_mirror_is_a_clear_error() -> None:
    if build.compiler() is None:
        pytest.skip("no C compiler here")

    class ShortStep(ctypes.Structure):  # stack_step without its last scratch pointer
        _fields_ = abi.StackStep._fields_[:-1]

    wrong = abi.Library(abi.STACK.source, abi.STACK.what, abi.STACK.entries,
                        (*abi.STACK.structs[:2], ("fg_sizeof_stack_step", ShortStep)))
    with pytest.raises(abi.ABIError, match=r"cpu_stack.c's stack_step is \d+ bytes, its mirror .* ShortStep"):
        abi.open_library(wrong)
    with pytest.raises(abi.ABIError):  # not swallowed into "the native kernels did not build"
        abi.load(wrong)


def test_lanes_and_the_vector_types_are_defined_once() -> None:
    python = [f"{p.relative_to(ROOT)}" for p in (ROOT / "kernels").rglob("*.py")
              if re.search(r"^LANES\s*=", p.read_text(), re.M)]
    assert python == ["kernels/native/abi.py"]
    native = sorted((ROOT / "kernels" / "native").glob("*.[ch]"))
    for pattern in (r"#define LANES\b", r"typedef float vf16\b", r"typedef void \(\*rms_norm_fn\)", r"#define PANEL\b"):
        assert [p.name for p in native if re.search(pattern, p.read_text())] == ["fg_common.h"], pattern
