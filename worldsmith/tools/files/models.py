"""Pydantic contracts produced by the profiler (what LLM agents see instead of raw files)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SemanticType = Literal["id", "categorical", "numeric", "datetime", "text", "bool"]


class ValueCount(BaseModel):
    value: str
    count: int


class ColumnProfile(BaseModel):
    """Statistics of one column (computed on the stats sample when the table is sampled)."""

    name: str
    dtype: str = Field(description="pandas dtype as read")
    semantic_type: SemanticType
    null_rate: float = Field(description="fraction of missing values, 0..1")
    n_unique: int = Field(description="distinct non-null values")
    min: float | str | None = None
    max: float | str | None = None
    mean: float | None = None
    std: float | None = None
    top_values: list[ValueCount] = Field(default_factory=list, description="most frequent values (categoricals)")
    examples: list[str] = Field(default_factory=list, description="a few distinct non-null values, clipped")
    notes: list[str] = Field(default_factory=list, description="data-quality remarks (mixed types, padded names, …)")


class TableProfile(BaseModel):
    """Shape, columns, sample rows and keys of one table in a file."""

    file: str = Field(description="path relative to the workspace root when known")
    table: str | None = Field(None, description="sheet / SQLite table / JSON key; None for single-table files")
    format: str
    n_rows: int
    n_rows_exact: bool = Field(description="False when n_rows is an estimate (line count of a sampled file)")
    n_cols: int
    columns: list[ColumnProfile]
    sample_rows: list[dict[str, str]] = Field(default_factory=list, description="first rows, stringified and clipped")
    candidate_keys: list[list[str]] = Field(default_factory=list, description="unique non-null columns or pairs")
    sampled: bool = False
    sampling_note: str | None = None
    load: str | None = Field(None, description="the pandas call that loads this table, names quoted as Python literals")
    alias: str | None = Field(None, description="a second, plain name the sandbox mounts the file under, if any")
    alias_load: str | None = Field(None, description="`load` with the alias in place of the name")

    @property
    def label(self) -> str:
        return table_label(self.file, self.table)


def table_label(file: str, table: str | None) -> str:
    """A table as the profile lists it: `file`, or `file[table]` for one table of several in a file."""
    return f"{file}[{table}]" if table is not None else file


class ColumnRef(BaseModel):
    file: str
    table: str | None = None
    column: str

    @property
    def table_label(self) -> str:
        return table_label(self.file, self.table)

    @property
    def label(self) -> str:
        return f"{self.table_label}.{self.column}"


class CandidateJoin(BaseModel):
    """Two columns that probably link two tables."""

    left: ColumnRef
    right: ColumnRef
    reason: Literal["foreign_key", "name", "overlap", "name+overlap"]
    overlap_ratio: float | None = Field(
        None, description="|distinct(left) ∩ distinct(right)| / min(|distinct(left)|, |distinct(right)|), on samples"
    )
    left_unique: bool = False
    right_unique: bool = False
    spellings: tuple[str, str] | None = Field(
        None, description="one value of each side when the two columns spell the same ids differently (P-00001 vs "
                          "PAT_1) and match only by the number in them; overlap_ratio is then over those numbers")


class FileFailure(BaseModel):
    file: str
    table: str | None = None
    reason: str = Field(description="ReadErrorReason value")
    message: str


class DocumentNote(BaseModel):
    """A non-table file (memo, notes, script) listed with its first lines."""

    file: str
    size_bytes: int
    first_lines: list[str]


class OtherFile(BaseModel):
    """A file neither read as a table nor as a document (images, archives, …)."""

    file: str
    size_bytes: int
    note: str


class WorkspaceProfile(BaseModel):
    """Everything the agents need to know about a folder of data files, without the raw files."""

    root: str | None = None
    tables: list[TableProfile] = Field(default_factory=list)
    joins: list[CandidateJoin] = Field(default_factory=list)
    failures: list[FileFailure] = Field(default_factory=list)
    documents: list[DocumentNote] = Field(default_factory=list)
    other_files: list[OtherFile] = Field(default_factory=list)

    def to_prompt(self, max_chars: int = 8000, compact: bool = False) -> str:
        """Text rendering that fits `max_chars`, shedding detail (sample rows, column stats) as needed; `compact`:
        the schema-first style with a few rows and no summary statistics."""
        from worldsmith.tools.files.render import render_workspace

        return render_workspace(self, max_chars, compact)
