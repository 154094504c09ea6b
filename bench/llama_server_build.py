"""Build llama.cpp's ``llama-server`` from the sources vendored in the llama-cpp-python sdist.

The sdist on PyPI carries the exact llama.cpp that the installed binding was compiled from, so
the peer runs the same kernels as ``python -m llama_cpp.server``. The steps, which this script
runs and caches (``~/.cache/clawloop/llama-server-<version>/llama-server``):

    pip download --no-deps --no-binary :all: llama-cpp-python==<version> -d <dir>
    tar xzf <dir>/llama_cpp_python-<version>.tar.gz -C <dir>
    cmake -S <dir>/llama_cpp_python-<version>/vendor/llama.cpp -B <build> -G Ninja \\
        -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \\
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON
    cmake --build <build> --target llama-server -j <cores>

About 30 minutes on this 2-core machine while it was shared (load average 6 to 8); expect
about a third of that on 2 idle cores. Run ``python bench/llama_server_build.py`` to build
ahead.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path


def cached_binary(version: str | None = None) -> Path:
    """Where the binary for ``version`` (default: the installed binding's) is cached."""
    version = version or importlib.metadata.version("llama-cpp-python")
    return Path.home() / ".cache" / "clawloop" / f"llama-server-{version}" / "llama-server"


def build(version: str | None = None, jobs: int | None = None) -> Path:
    """The cached ``llama-server``, built first if it is not there yet."""
    version = version or importlib.metadata.version("llama-cpp-python")
    target = cached_binary(version)
    if target.is_file():
        return target
    work = target.parent / "src"
    work.mkdir(parents=True, exist_ok=True)
    sdist = work / f"llama_cpp_python-{version}.tar.gz"
    if not sdist.is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"llama-cpp-python=={version}",
                "-d",
                str(work),
            ],
            check=True,
        )
    source = work / f"llama_cpp_python-{version}"
    if not source.is_dir():
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
    build_dir = work / "build"
    subprocess.run(
        [
            "cmake",
            "-S",
            str(source / "vendor" / "llama.cpp"),
            "-B",
            str(build_dir),
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DGGML_NATIVE=ON",
            "-DLLAMA_CURL=OFF",
            "-DBUILD_SHARED_LIBS=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=ON",
        ],
        check=True,
    )
    subprocess.run(
        [
            "cmake",
            "--build",
            str(build_dir),
            "--target",
            "llama-server",
            "-j",
            str(jobs or os.cpu_count() or 2),
        ],
        check=True,
    )
    built = next(build_dir.rglob("bin/llama-server"))
    shutil.copy2(built, target)
    return target


if __name__ == "__main__":
    print(build())
