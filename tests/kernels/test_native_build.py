"""kernels/native/build.py: what a built library's cache key holds (the source and the shared
header, the compiler's path and version, the flags, the CPU's features on x86 and aarch64)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fairgate.kernels.native import build

SOURCE = build.FOLDER / "cpu_fused.c"
X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu vme sse2 avx avx2 fma avx512f avx512_vnni avx512_bf16 amx_tile amx_bf16
bogomips\t: 4200.00
"""
AARCH64_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm asimddp sve bf16
CPU implementer\t: 0x41
CPU architecture: 8
"""


def test_the_key_holds_the_compilers_version(monkeypatch: pytest.MonkeyPatch) -> None:
    cc = build.compiler()
    if cc is None:
        pytest.skip("no C compiler here")
    assert build.compiler_version(cc)  # `cc --version` says something on every compiler we build with
    key = build.cache_key(SOURCE, cc, build.FLAGS)
    monkeypatch.setattr(build, "compiler_version", lambda _cc: "gcc (Debian 99.1.0-1) 99.1.0")
    upgraded = build.cache_key(SOURCE, cc, build.FLAGS)
    assert upgraded != key and upgraded == build.cache_key(SOURCE, cc, build.FLAGS)


def test_the_key_holds_the_shared_header_and_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "compiler_version", lambda _cc: "cc 1.0")
    key = build.cache_key(SOURCE, "/usr/bin/cc", build.FLAGS)
    for header in build.FOLDER.glob("*.h"):
        shutil.copy(header, tmp_path)
    (tmp_path / "fg_common.h").write_text((tmp_path / "fg_common.h").read_text() + "\n/* changed */\n")
    monkeypatch.setattr(build, "FOLDER", tmp_path)
    assert build.cache_key(SOURCE, "/usr/bin/cc", build.FLAGS) != key
    monkeypatch.setattr(build, "FOLDER", SOURCE.parent)
    monkeypatch.setattr(build, "cpu_features", lambda cpuinfo=None: AARCH64_CPUINFO.splitlines()[2])
    assert build.cache_key(SOURCE, "/usr/bin/cc", build.FLAGS) != key


def test_cpu_features_on_x86_and_aarch64() -> None:
    assert build.cpu_features(X86_CPUINFO).startswith("flags\t\t: fpu")
    assert build.cpu_features(AARCH64_CPUINFO) == AARCH64_CPUINFO.splitlines()[2]
    assert build.instruction_sets(X86_CPUINFO) == "avx512f+avx512_vnni+avx512_bf16+amx"
    assert build.instruction_sets(AARCH64_CPUINFO) == "neon+dotprod+sve+bf16"
    assert build.instruction_sets("processor\t: 0\nflags\t\t: fpu sse2\n") == "no vector extensions"
