"""A hostile and malformed file corpus, generated on demand (nothing large is committed).

Each builder streams its output, so making a 10 GiB gzip bomb costs one compressed 16 MiB block written 640
times. `CASES` says, for every file, which `FileReadError` reason and which `FileLimits` setting a reader must end
with under the default limits.
"""

from __future__ import annotations

import gzip
import sqlite3
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

MiB = 2**20


@dataclass(frozen=True)
class Case:
    """One hostile file: the reason and the limit setting its read must end with (None: the read succeeds)."""

    file: str
    reason: str | None
    setting: str | None
    sql: bool = False  # whether the SQL tool is tried on it
    slow: bool = False  # parses a few MiB of records before its budget is passed (about 1-3 s)


CASES: list[Case] = [
    Case("gzip_bomb.csv.gz", "too_large", "max_compression_ratio", sql=True),
    Case("gzip_bomb.jsonl.gz", "too_large", "max_compression_ratio", sql=True, slow=True),
    Case("gzip_bomb.json.gz", "too_large", "max_compression_ratio", sql=True),
    Case("one_line.csv", "too_large", "max_line_bytes", sql=True),
    Case("long_second_line.csv", "too_large", "max_line_bytes", sql=True),
    Case("repeated_header.csv", "too_large", "max_columns", sql=True),
    Case("deep.json", "too_large", "max_json_depth", sql=True),
    Case("deep_line.jsonl", "too_large", "max_json_depth", sql=True),
    Case("huge_line.jsonl", "too_large", "max_line_bytes", sql=True),
    Case("shared_strings.xlsx", "too_large", "max_shared_strings_bytes", sql=True),
    Case("zip_bomb.xlsx", "too_large", "max_compression_ratio", sql=True),
    Case("declared_bomb.xlsx", "too_large", "max_xlsx_member_bytes", sql=True),
    Case("garbled_header.sqlite", "corrupt", None, sql=True),
    Case("truncated.sqlite", "corrupt", None, sql=True),
    Case("only_recursive_view.sqlite", "empty", None),
]


def gzip_bomb(path: Path, first: bytes, repeated: bytes, total: int = 10 * 1024**3) -> Path:
    """`first` then `repeated` bytes until `total`: a multi-member gzip (each member one compressed 16 MiB block)."""
    block = repeated * (16 * MiB // len(repeated))
    member = gzip.compress(block, compresslevel=9, mtime=0)
    with open(path, "wb") as fh:
        fh.write(gzip.compress(first, mtime=0))
        for _ in range(total // len(block)):
            fh.write(member)
    return path


def one_line_csv(path: Path, size: int = 24 * MiB) -> Path:
    """A single line of `size` bytes and no newline: millions of fields in the header."""
    with open(path, "wb") as fh:
        for _ in range(size // MiB):
            fh.write(b"1," * (MiB // 2))
    return path


def long_second_line_csv(path: Path, size: int = 24 * MiB) -> Path:
    with open(path, "wb") as fh:
        fh.write(b"a,b\n1,2\n3,")
        for _ in range(size // MiB):
            fh.write(b"x" * MiB)
        fh.write(b"\n5,6\n")
    return path


def repeated_header_csv(path: Path, n: int = 80_000) -> Path:
    path.write_text(",".join(["a"] * n) + "\n" + ",".join(["1"] * n) + "\n")
    return path


def deep_json(path: Path, depth: int = 100_000) -> Path:
    path.write_text('{"k": ' + "[" * depth + "]" * depth + "}")
    return path


def deep_line_jsonl(path: Path, depth: int = 100_000) -> Path:
    path.write_text('{"a": 1}\n{"a": ' + '{"b": ' * depth + "1" + "}" * depth + "}\n")
    return path


def huge_line_jsonl(path: Path, size: int = 24 * MiB) -> Path:
    with open(path, "wb") as fh:
        fh.write(b'{"a": 1}\n{"a": "')
        for _ in range(size // MiB):
            fh.write(b"x" * MiB)
        fh.write(b'"}\n')
    return path


_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    '<Override PartName="/xl/sharedStrings.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'
    "</Types>"
)
_ROOT_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="xl/workbook.xml"/></Relationships>'
)
_WORKBOOK = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'
)
_WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
    'Target="worksheets/sheet1.xml"/>'
    '<Relationship Id="rId2" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" '
    'Target="sharedStrings.xml"/></Relationships>'
)
_SHEET_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
)
_SHEET = _SHEET_HEAD + '<row r="1"><c r="A1" t="s"><v>0</v></c></row></sheetData></worksheet>'
_SST_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
)


def _workbook(path: Path, sheet: tuple[str, bytes, int], shared: tuple[str, bytes, int]) -> Path:
    """A minimal xlsx; `sheet` and `shared` are (head, repeated unit, total bytes) streamed into their parts."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("[Content_Types].xml", _CONTENT_TYPES)
        zf.writestr("_rels/.rels", _ROOT_RELS)
        zf.writestr("xl/workbook.xml", _WORKBOOK)
        zf.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS)
        for name, (head, unit, total) in (("xl/worksheets/sheet1.xml", sheet), ("xl/sharedStrings.xml", shared)):
            with zf.open(name, "w", force_zip64=total > 2**31) as part:
                part.write(head.encode())
                block = unit * max(1, (8 * MiB) // max(len(unit), 1)) if unit else b""
                written = 0
                while unit and written < total:
                    part.write(block)
                    written += len(block)
                part.write(b"</sheetData></worksheet>" if name.endswith("sheet1.xml") else b"</sst>")
    return path


def shared_strings_xlsx(path: Path, size: int = 300 * MiB) -> Path:
    """One cell, and a shared-strings table of `size` bytes (openpyxl loads it whole)."""
    return _workbook(
        path,
        (_SHEET_HEAD + '<row r="1"><c r="A1" t="s"><v>0</v></c></row>', b"", 0),
        (_SST_HEAD, b"<si><t>shared string</t></si>", size),
    )


def zip_bomb_xlsx(path: Path, size: int = 64 * MiB) -> Path:
    """A sheet part of `size` bytes of identical rows, compressed about 1000:1."""
    return _workbook(
        path,
        (_SHEET_HEAD, b'<row><c t="s"><v>0</v></c></row>', size),
        (_SST_HEAD + "<si><t>x</t></si>", b"", 0),
    )


def declared_bomb_xlsx(path: Path) -> Path:
    """A small valid workbook whose central directory declares a ~4 GB sheet part."""
    _workbook(path, (_SHEET_HEAD + '<row r="1"><c r="A1" t="s"><v>0</v></c></row>', b"", 0),
              (_SST_HEAD + "<si><t>x</t></si>", b"", 0))
    data = bytearray(path.read_bytes())
    name = b"xl/worksheets/sheet1.xml"
    at = data.find(b"PK\x01\x02")  # first central-directory entry
    while at >= 0:
        name_len = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + name_len] == name:
            struct.pack_into("<I", data, at + 24, 0xFFFF0000)  # uncompressed size
            break
        at = data.find(b"PK\x01\x02", at + 46)
    path.write_bytes(bytes(data))
    return path


def _small_db(path: Path, rows: int = 20) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"name {i} " + "x" * 200) for i in range(rows)])
    conn.commit()
    conn.close()
    return path


def garbled_header_sqlite(path: Path) -> Path:
    """The SQLite magic is intact; the rest of the 100-byte header (page size, counters) is garbage."""
    _small_db(path)
    data = bytearray(path.read_bytes())
    data[16:100] = bytes((i * 37 + 11) % 256 for i in range(84))
    path.write_bytes(bytes(data))
    return path


def truncated_sqlite(path: Path) -> Path:
    """A valid header and schema, but the table's pages cut off: the file ends mid-database."""
    _small_db(path, rows=5000)
    data = path.read_bytes()
    page = struct.unpack_from(">H", data, 16)[0]
    path.write_bytes(data[: page * 3])
    return path


_RECURSIVE = "CREATE VIEW forever AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r"


def recursive_view_sqlite(path: Path) -> Path:
    """An ordinary table plus a view that never ends."""
    _small_db(path)
    conn = sqlite3.connect(path)
    conn.execute(_RECURSIVE)
    conn.commit()
    conn.close()
    return path


def only_recursive_view_sqlite(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute(_RECURSIVE)
    conn.commit()
    conn.close()
    return path


def decimal_comma_csv(path: Path) -> Path:
    """Semicolons, decimal commas and "." thousands groups, as a European spreadsheet exports them."""
    path.write_text("city;price;qty\nOslo;1.234,5;3\nLima;2,25;4\nRome;-0,5;5\n")
    return path


def decimal_comma_dates_csv(path: Path) -> Path:
    """Decimal commas next to dotted dates: the dates must stay text (never read as grouped integers)."""
    path.write_text("city;price;when\nOslo;3,5;01.02.2020\nLima;2,25;02.02.2020\n")
    return path


def build_corpus(folder: Path) -> dict[str, Path]:
    """Every hostile file of `CASES` plus `recursive_view.sqlite` and `decimal_comma.csv`, written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    makers = {
        "gzip_bomb.csv.gz": lambda p: gzip_bomb(p, b"a,b\n", b"1,2\n"),
        "gzip_bomb.jsonl.gz": lambda p: gzip_bomb(p, b'{"a": 1}\n', b'{"a": 1}\n'),
        "gzip_bomb.json.gz": lambda p: gzip_bomb(p, b"[", b'{"a": 1},'),
        "one_line.csv": one_line_csv,
        "long_second_line.csv": long_second_line_csv,
        "repeated_header.csv": repeated_header_csv,
        "deep.json": deep_json,
        "deep_line.jsonl": deep_line_jsonl,
        "huge_line.jsonl": huge_line_jsonl,
        "shared_strings.xlsx": shared_strings_xlsx,
        "zip_bomb.xlsx": zip_bomb_xlsx,
        "declared_bomb.xlsx": declared_bomb_xlsx,
        "garbled_header.sqlite": garbled_header_sqlite,
        "truncated.sqlite": truncated_sqlite,
        "only_recursive_view.sqlite": only_recursive_view_sqlite,
        "recursive_view.sqlite": recursive_view_sqlite,
        "decimal_comma.csv": decimal_comma_csv,
        "decimal_comma_dates.csv": decimal_comma_dates_csv,
    }
    for name in makers:
        (folder / name).unlink(missing_ok=True)
    return {name: make(folder / name) for name, make in makers.items()}
