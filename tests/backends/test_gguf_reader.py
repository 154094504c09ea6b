"""The one GGUF reader: checked against the gguf package's own reader, and alone in the repo."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agent.errors import UserError
from backends.gguf.reader import GGUFFile, read_gguf

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

ROOT = Path(__file__).resolve().parents[2]
Q = gguf.GGMLQuantizationType


def _same_as_gguf(ours: GGUFFile, path: Path) -> None:
    """Every field and every tensor as ``gguf.GGUFReader`` reads them."""
    theirs = gguf.GGUFReader(str(path))
    fields = {k: f for k, f in theirs.fields.items() if not k.startswith("GGUF.")}
    assert set(ours.metadata) == set(fields)
    for key, found in fields.items():
        assert ours.get(key) == found.contents(), key
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for mine, ref in zip(ours.tensors, theirs.tensors, strict=True):
        assert mine.shape == tuple(int(d) for d in reversed(ref.shape.tolist()))
        assert (mine.ggml_type, mine.offset) == (int(ref.tensor_type), ref.data_offset)
        assert (mine.n_elements, mine.n_bytes) == (ref.n_elements, ref.n_bytes)
        array = ours.tensor_array(mine)
        assert array.dtype == ref.data.dtype and array.shape == ref.data.shape, mine.name
        assert np.array_equal(array, ref.data), mine.name


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """A small GGUF written by gguf's writer: every value type, plain and quantized tensors."""
    path = tmp_path / "small.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_custom_alignment(64)
    scalars: dict[str, tuple[str, object]] = {
        "t.u8": ("uint8", 200), "t.i8": ("int8", -100), "t.u16": ("uint16", 60000),
        "t.i16": ("int16", -30000), "t.u32": ("uint32", 4_000_000_000),
        "t.i32": ("int32", -2_000_000_000), "t.u64": ("uint64", 2**60),
        "t.i64": ("int64", -(2**60)), "t.f32": ("float32", 1.5), "t.f64": ("float64", 0.1),
        "t.bool": ("bool", True), "t.str": ("string", "héllo"),
    }  # fmt: skip
    for key, (kind, value) in scalars.items():
        getattr(writer, f"add_{kind}")(key, value)
    arrays = {"t.ints": [3, -1, 7], "t.floats": [0.25, -2.0], "t.words": ["a", "", "ß"]}
    for key, value in arrays.items():
        writer.add_array(key, value)
    rng = np.random.default_rng(0)
    writer.add_tensor("f32", rng.standard_normal((3, 5)).astype(np.float32))
    writer.add_tensor("f16", rng.standard_normal((2, 4, 8)).astype(np.float16))
    writer.add_tensor("i32", np.arange(7, dtype=np.int32))
    for kind in ("Q8_0", "Q4_1"):
        values = rng.standard_normal((4, 64)).astype(np.float32)
        writer.add_tensor(kind, gguf.quants.quantize(values, Q[kind]), raw_dtype=Q[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, {**{k: v for k, (_, v) in scalars.items()}, **arrays}


def test_a_written_file_reads_as_gguf_reads_it(written: tuple[Path, dict[str, object]]) -> None:
    path, values = written
    with read_gguf(path) as reader:
        assert reader.version == 3 and reader.get("general.alignment") == 64
        for key, value in values.items():
            assert reader.get(key) == (pytest.approx(value) if key == "t.f64" else value), key
        assert reader.get("t.missing", "default") == "default"
        _same_as_gguf(reader, path)
        f32 = next(t for t in reader.tensors if t.name == "f32")
        assert f32.offset % 64 == 0 and reader.tensor_array(f32).shape == (3, 5)
        assert reader.tensor_bytes(f32).nbytes == f32.n_bytes == 60


def test_arrays_are_read_when_asked(written: tuple[Path, dict[str, object]]) -> None:
    path, _ = written
    with read_gguf(path, arrays=False) as reader:
        assert "t.words" not in reader.metadata and reader.get("t.str") == "héllo"
        assert reader.array_lengths == {"t.ints": 3, "t.floats": 2, "t.words": 3}
        assert [t.name for t in reader.tensors] == ["f32", "f16", "i32", "Q8_0", "Q4_1"]
    with read_gguf(path, arrays=["t.words"]) as reader:
        assert reader.get("t.words") == ["a", "", "ß"] and "t.ints" not in reader.metadata


def test_the_bundled_model_reads_as_gguf_reads_it(bundled_model: Path) -> None:
    with read_gguf(bundled_model) as reader:
        assert reader.get("general.architecture") == "llama"
        assert len(reader.get("tokenizer.ggml.tokens")) == 49152
        _same_as_gguf(reader, bundled_model)


def test_damaged_files_are_user_errors(written: tuple[Path, dict[str, object]]) -> None:
    path, _ = written
    full = path.read_bytes()
    cut = path.with_name("cut.gguf")
    cut.write_bytes(full[:200])
    with pytest.raises(UserError, match="damaged or truncated"):
        read_gguf(cut)
    with read_gguf(path, arrays=False) as reader:
        end = max(t.offset for t in reader.tensors)
    cut.write_bytes(full[: end + 4])  # the header whole, the last tensor's data cut short
    reader = read_gguf(cut)
    with pytest.raises(UserError, match="runs past the end"):
        reader.tensor_array(reader.tensors[-1])
    cut.write_bytes(b"GGML" + full[4:])
    with pytest.raises(UserError, match="not a GGUF"):
        read_gguf(cut)


# ---- One reader: nothing else in the product or bench parses a GGUF file. ----

_SOURCES = ("agent", "sandbox", "backends", "skills", "connectors", "cli", "bench")
_READER = ROOT / "backends" / "gguf" / "reader.py"
# Reading a binary format by hand: struct, mmap, numpy's memmap or frombuffer.
_BINARY = re.compile(r"\bstruct\.|\.unpack(_from)?\(|\bStruct\(|\bmmap\.|\bmemmap\(|frombuffer\(")


def gguf_parsers(path: Path) -> list[str]:
    """Where ``path`` uses gguf.GGUFReader or reads a GGUF file by hand: a function (or class)
    that speaks of GGUF and reads bytes with struct, mmap or numpy."""
    source = path.read_text(encoding="utf-8")
    found = [f"{path.name}: GGUFReader"] if "GGUFReader" in source else []
    if not re.search("gguf", source, re.IGNORECASE) or not _BINARY.search(source):
        return found
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            if re.search("gguf", text, re.IGNORECASE) and _BINARY.search(text):
                found.append(f"{path.name}: {node.name}")
    return found


def test_the_checker_finds_a_gguf_parser(tmp_path: Path) -> None:
    sneaky = tmp_path / "m.py"
    sneaky.write_text(
        "import struct\n\ndef header(buf):\n"
        "    assert buf[:4] == b'GGUF'\n    return struct.unpack_from('<IQQ', buf, 4)\n"
    )
    assert gguf_parsers(sneaky) == ["m.py: header"]
    sneaky.write_text("from gguf import GGUFReader\n")
    assert gguf_parsers(sneaky) == ["m.py: GGUFReader"]


def test_the_repo_has_one_gguf_reader() -> None:
    paths = [p for name in _SOURCES for p in sorted((ROOT / name).rglob("*.py"))]
    assert _READER in paths and len(paths) > 100
    assert gguf_parsers(_READER), "the checker no longer recognises the reader itself"
    wrong = [hit for p in paths if p != _READER for hit in gguf_parsers(p)]
    assert not wrong, "GGUF files are read through backends/gguf/reader.py only:\n" + "\n".join(
        wrong
    )
