"""Data-file tools: read any supported table file, profile a workspace for LLM prompts."""

from worldsmith.tools.files.errors import FileLimits, FileReadError, ReadErrorReason
from worldsmith.tools.files.formats import supported_suffixes
from worldsmith.tools.files.models import (
    CandidateJoin,
    ColumnProfile,
    ColumnRef,
    DocumentNote,
    FileFailure,
    OtherFile,
    TableProfile,
    ValueCount,
    WorkspaceProfile,
)
from worldsmith.tools.files.profile import profile_table, profile_workspace
from worldsmith.tools.files.readers import TableRef, count_rows, list_tables, read_table

__all__ = [
    "CandidateJoin",
    "ColumnProfile",
    "ColumnRef",
    "DocumentNote",
    "FileFailure",
    "FileLimits",
    "FileReadError",
    "OtherFile",
    "ReadErrorReason",
    "TableProfile",
    "TableRef",
    "ValueCount",
    "WorkspaceProfile",
    "count_rows",
    "list_tables",
    "profile_table",
    "profile_workspace",
    "read_table",
    "supported_suffixes",
]
