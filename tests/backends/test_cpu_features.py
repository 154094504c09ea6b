"""One reader of /proc/cpuinfo for every backend that asks what the CPU offers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.llamacpp.backend import default_extra_buffers
from backends.local import cpu_features
from backends.training.cpu import native_bf16

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu avx2 fma avx512f avx512bw avx512_bf16 amx_tile
processor\t: 1
flags\t\t: fpu
"""


@pytest.fixture
def cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "cpuinfo"
    monkeypatch.setattr(cpu_features, "CPUINFO", path)
    monkeypatch.delenv("CLAWLOOP_LLAMACPP_EXTRA_BUFFERS", raising=False)
    cpu_features._lines.cache_clear()
    yield path
    cpu_features._lines.cache_clear()


def test_the_first_cpus_flags_vendor_and_signature(cpuinfo: Path) -> None:
    cpuinfo.write_text(X86)
    assert cpu_features.cpu_flags() == {"fpu", "avx2", "fma", "avx512f", "avx512bw",
                                        "avx512_bf16", "amx_tile"}  # fmt: skip
    assert cpu_features.cpu_vendor() == "GenuineIntel"
    assert cpu_features.cpu_signature() == X86.splitlines()[2]
    assert native_bf16() and not default_extra_buffers()  # AMX advertised: no extra buffers


def test_arm_features_and_an_unreadable_file(cpuinfo: Path) -> None:
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd sve\n")
    assert cpu_features.cpu_flags() == {"fp", "asimd", "sve"} and cpu_features.cpu_vendor() == ""
    assert not native_bf16() and default_extra_buffers()
    cpuinfo.unlink()
    cpu_features._lines.cache_clear()
    assert cpu_features.cpu_flags() == frozenset() and cpu_features.cpuinfo_line("flags") == ""
    assert cpu_features.cpu_signature() == cpu_features.platform.processor()
