"""Integrity before trust: a world is audited or given tasks only while its manifest still describes it.

`build_world` writes `manifest.json` last, listing every file it wrote with its sha256. Every reader of an
existing world (the auditor, task writing, a rebuild that would reuse the folder) calls `require_intact_world`
first, so a truncated, edited, half-copied or manifest-less world is refused with the files named instead of
being audited and written into as if it were sound. Files the manifest does not list are allowed beside the
world (REPORT.md, tasks/, dag.png) but not inside the data room or the truth folder, whose every file is shipped
to solvers or used as the answer key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from worldsmith.core.store import ArtifactError, iter_files, sha256_file

from .artifacts import AUDIT, DATA, MANIFEST, TRUTH, WORLD_MD, Manifest, write_json

ProblemKind = Literal["no_manifest", "bad_manifest", "incomplete", "missing", "modified", "unlisted"]
_SHOWN = 5  # problems named in an error message; the rest are counted
_SEALED = (f"{DATA}/", f"{TRUTH}/")  # folders whose every file must be in the manifest
AUDITOR_FILES = (AUDIT, WORLD_MD)  # rewritten by `world audit`; their manifest entries follow the rewrite


class ManifestProblem(BaseModel):
    """One way a world folder differs from its manifest."""

    path: str  # relative to the world folder
    kind: ProblemKind
    expected: str | None = None  # sha256 in the manifest
    actual: str | None = None  # sha256 on disk now
    size: int | None = None  # bytes on disk now
    detail: str = ""

    def __str__(self) -> str:
        if self.kind == "modified":
            return (f"{self.path} modified (sha256 {self.expected[:12] if self.expected else '?'}… in the manifest, "
                    f"{self.actual[:12] if self.actual else '?'}… now, {self.size} bytes)")
        text = {"no_manifest": "missing: the build never finished or the manifest was removed",
                "bad_manifest": "unreadable", "incomplete": "marks the world incomplete",
                "missing": "missing", "unlisted": "not in the manifest (added after the build)"}[self.kind]
        return f"{self.path} {text}" + (f" ({self.detail})" if self.detail else "")


class WorldIntegrityError(ArtifactError):
    """A world folder that does not match its manifest; `problems` lists every difference found."""

    def __init__(self, world_dir: Path, problems: list[ManifestProblem]):
        self.world_dir, self.problems = world_dir, problems
        named = "; ".join(str(p) for p in problems[:_SHOWN])
        more = f"; +{len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
        super().__init__(f"{world_dir}: not an intact world ({len(problems)} problem(s)): {named}{more}. "
                         f"Rebuild it with `worldsmith world new {world_dir} --overwrite` (same domain, seed and rows) "
                         f"or restore the named files from a copy; an altered world is never audited or given tasks.")


def read_manifest(world_dir: str | Path) -> tuple[Manifest | None, ManifestProblem | None]:
    """The manifest (None when absent or unreadable) and what is wrong with it, if anything."""
    path = Path(world_dir) / MANIFEST
    if not path.is_file():
        return None, ManifestProblem(path=MANIFEST, kind="no_manifest")
    try:
        manifest = Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError, OSError) as exc:
        return None, ManifestProblem(path=MANIFEST, kind="bad_manifest", detail=str(exc).splitlines()[0][:160])
    if not manifest.complete:
        return manifest, ManifestProblem(path=MANIFEST, kind="incomplete")
    return manifest, None


def verify_manifest(world_dir: str | Path) -> list[ManifestProblem]:
    """Every difference between a world folder and its manifest (empty list = intact): the manifest itself, then
    its files in path order, then files added to data/ or .truth/."""
    return _check(Path(world_dir))[1]


def require_intact_world(world_dir: str | Path) -> Manifest:
    """The world's manifest, or `WorldIntegrityError` naming the first problems and how to fix them."""
    root = Path(world_dir)
    manifest, problems = _check(root)
    if manifest is None or problems:
        raise WorldIntegrityError(root, problems)
    return manifest


def _check(root: Path) -> tuple[Manifest | None, list[ManifestProblem]]:
    manifest, problem = read_manifest(root)
    problems = [problem] if problem else []
    if manifest is None:
        return None, problems
    for rel, expected in sorted(manifest.files.items()):
        p = root / rel
        if not p.is_file():
            problems.append(ManifestProblem(path=rel, kind="missing", expected=expected))
            continue
        actual = sha256_file(p)
        if actual != expected:
            problems.append(ManifestProblem(path=rel, kind="modified", expected=expected, actual=actual,
                                            size=p.stat().st_size))
    for sealed in _SEALED:
        folder = root / sealed
        if folder.is_dir():
            for p in iter_files(folder):
                rel = p.relative_to(root).as_posix()
                if rel not in manifest.files:
                    problems.append(ManifestProblem(path=rel, kind="unlisted", size=p.stat().st_size))
    return manifest, problems


def record_auditor_files(world_dir: str | Path) -> None:
    """After the auditor rewrote AUDIT.json and WORLD.md of a verified world, point the manifest at what it wrote,
    so a re-audit by a newer auditor does not make the world look tampered with. A no-op when nothing changed
    (an identical re-audit leaves the manifest's bytes alone) or when there is no manifest (a build in progress)."""
    root = Path(world_dir)
    manifest, problem = read_manifest(root)
    if manifest is None or problem is not None:
        return
    files = dict(manifest.files)
    for name in AUDITOR_FILES:
        if (root / name).is_file():
            files[name] = sha256_file(root / name)
    if files != manifest.files:
        write_json(root / MANIFEST, manifest.model_copy(update={"files": files}).model_dump(mode="json"))
