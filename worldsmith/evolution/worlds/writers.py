"""Byte-deterministic writers for observed tables.

Same input -> same bytes: no timestamps (gzip mtime 0, fixed xlsx document dates and zip entry
times), fixed float formatting (pandas repr), '\n' line endings, no index columns.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import re
import sqlite3
import zipfile
from collections import defaultdict
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pydantic import BaseModel

from .observe import ObservedSystem

EXT = {"csv": "csv", "csv.gz": "csv.gz", "xlsx": "xlsx", "json": "json", "jsonl": "jsonl", "parquet": "parquet",
       "sqlite": "sqlite", "txt": "txt"}
FIXED_TIME = dt.datetime(2000, 1, 1, 0, 0, 0)
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class FileRecord(BaseModel):
    path: str  # relative to the data directory
    format: str
    part: str | None = None  # sheet (xlsx) or table (sqlite)
    system: str
    rows: int
    columns: list[str]


def _csv_bytes(df: pd.DataFrame) -> bytes:
    """CSV via Arrow's writer (about 4x faster than pandas): strings quoted, blanks empty, shortest floats."""
    buf = io.BytesIO()
    table = pa.Table.from_pandas(df, preserve_index=False)
    pa_csv.write_csv(table, buf, pa_csv.WriteOptions(quoting_style="needed", eol="\n"))
    return buf.getvalue()


def write_csv(df: pd.DataFrame, path: Path) -> None:
    path.write_bytes(_csv_bytes(df))


def write_csv_gz(df: pd.DataFrame, path: Path) -> None:
    # mtime=0 and no file name in the header: the bytes depend on the data only
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1) as gz:
        gz.write(_csv_bytes(df))


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    table = pa.Table.from_pandas(df, preserve_index=False)
    pq.write_table(table, path, compression="snappy")


def write_json(df: pd.DataFrame, path: Path) -> None:
    path.write_text(df.to_json(orient="records", force_ascii=False, double_precision=10), encoding="utf-8")


def write_jsonl(df: pd.DataFrame, path: Path) -> None:
    text = df.to_json(orient="records", lines=True, force_ascii=False, double_precision=10) if len(df) else ""
    path.write_text(text if text.endswith("\n") or not text else text + "\n", encoding="utf-8")


def _cell(v: object) -> object:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


def _col_letter(j: int) -> str:
    out = ""
    j += 1
    while j:
        j, rem = divmod(j - 1, 26)
        out = chr(65 + rem) + out
    return out


_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _sheet_xml(df: pd.DataFrame) -> bytes:
    """SpreadsheetML for one sheet: inline strings, numbers as repr, blanks omitted, with a dimension."""
    letters = [_col_letter(j) for j in range(len(df.columns))]
    last = f"{letters[-1] if letters else 'A'}{len(df) + 1}"
    parts = ['<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<worksheet xmlns="http://schemas.openxml'
             'formats.org/spreadsheetml/2006/main"><dimension ref="A1:' + last + '"/><sheetData>']

    def cell(ref: str, v: object) -> str:
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return f'<c r="{ref}"><v>{v!r}</v></c>'
        text = _BAD_XML.sub("", xml_escape(str(v)))
        return f'<c r="{ref}" t="inlineStr"><is><t xml:space="preserve">{text}</t></is></c>'

    parts.append('<row r="1">' + "".join(cell(f"{L}1", str(c)) for L, c in zip(letters, df.columns)) + "</row>")
    for i, row in enumerate(df.astype(object).itertuples(index=False, name=None), start=2):
        cells = "".join(cell(f"{L}{i}", v) for L, v in zip(letters, map(_cell, row)) if v is not None)
        parts.append(f'<row r="{i}">{cells}</row>')
    parts.append("</sheetData></worksheet>")
    return "".join(parts).encode("utf-8")


_NS = 'xmlns="http://schemas.openxmlformats.org/'
_STYLES = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<styleSheet {_NS}spreadsheetml/2006/main">'
           '<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts><fills count="1"><fill>'
           '<patternFill patternType="none"/></fill></fills><borders count="1"><border/></borders><cellStyleXfs '
           'count="1"><xf/></cellStyleXfs><cellXfs count="1"><xf xfId="0"/></cellXfs><cellStyles count="1">'
           '<cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles></styleSheet>')


def write_xlsx(sheets: list[tuple[str, pd.DataFrame]], path: Path) -> None:
    """Several sheets in one workbook. Hand-written SpreadsheetML (openpyxl's writer is ~100x slower per cell);
    fixed document dates and zip entry times make the bytes reproducible."""
    stamp = FIXED_TIME.strftime("%Y-%m-%dT%H:%M:%SZ")
    n = len(sheets)
    files: list[tuple[str, bytes | str]] = [
        ("[Content_Types].xml", '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Types xmlns="http://'
         'schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/'
         'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
         '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.'
         'spreadsheetml.sheet.main+xml"/><Override PartName="/xl/styles.xml" ContentType="application/vnd.'
         'openxmlformats-officedocument.spreadsheetml.styles+xml"/><Override PartName="/docProps/core.xml" '
         'ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>'
         + "".join(f'<Override PartName="/xl/worksheets/sheet{i}.xml" ContentType="application/vnd.openxmlformats-'
                   'officedocument.spreadsheetml.worksheet+xml"/>' for i in range(1, n + 1)) + "</Types>"),
        ("_rels/.rels", f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships {_NS}package/2006/'
         'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
         'relationships/officeDocument" Target="xl/workbook.xml"/><Relationship Id="rId2" Type="http://schemas.'
         'openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>'
         "</Relationships>"),
        ("docProps/core.xml", '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<cp:coreProperties xmlns:cp='
         '"http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/'
         'elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-'
         f'instance"><dc:creator>worldsmith</dc:creator><dcterms:created xsi:type="dcterms:W3CDTF">{stamp}'
         f'</dcterms:created><dcterms:modified xsi:type="dcterms:W3CDTF">{stamp}</dcterms:modified>'
         "</cp:coreProperties>"),
        ("xl/workbook.xml", f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<workbook {_NS}spreadsheetml/'
         '2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets>'
         + "".join(f'<sheet name="{xml_escape(name[:31])}" sheetId="{i}" r:id="rId{i}"/>'
                   for i, (name, _) in enumerate(sheets, 1)) + "</sheets></workbook>"),
        ("xl/_rels/workbook.xml.rels", f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships '
         f'{_NS}package/2006/relationships">'
         + "".join(f'<Relationship Id="rId{i}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                   f'relationships/worksheet" Target="worksheets/sheet{i}.xml"/>' for i in range(1, n + 1))
         + f'<Relationship Id="rId{n + 1}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
           'styles" Target="styles.xml"/></Relationships>'),
        ("xl/styles.xml", _STYLES),
    ]
    files += [(f"xl/worksheets/sheet{i}.xml", _sheet_xml(df)) for i, (_, df) in enumerate(sheets, 1)]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o600 << 16
            z.writestr(info, data)


def _sql_type(s: pd.Series) -> str:
    if pd.api.types.is_integer_dtype(s):
        return "INTEGER"
    if pd.api.types.is_float_dtype(s):
        return "REAL"
    return "TEXT"


def write_sqlite(tables: list[tuple[str, pd.DataFrame]], path: Path) -> None:
    con = sqlite3.connect(path)
    try:
        for name, df in tables:
            cols = ", ".join(f'"{c}" {_sql_type(df[c])}' for c in df.columns)
            con.execute(f'CREATE TABLE "{name}" ({cols})')
            marks = ", ".join("?" for _ in df.columns)
            rows = df.astype(object).where(df.notna(), None).itertuples(index=False, name=None)
            con.executemany(f'INSERT INTO "{name}" VALUES ({marks})', ([_cell(v) for v in r] for r in rows))
        con.commit()
    finally:
        con.close()


_LOG_QUOTE = re.compile(r'[\s"=\\\]]')


def _log_value(v: object) -> str | None:
    """One value of a log record: numbers as written, text quoted when it holds spaces, quotes or '='."""
    v = _cell(v)
    if v is None:
        return None
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return repr(v)
    text = str(v)
    if text and not _LOG_QUOTE.search(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_log(df: pd.DataFrame, path: Path, source: str) -> None:
    """A free-text log, one record a line: `[date 2024-01-03] shop: order_id=O-00012 amount=40.5 note="x y"`.

    The bracket holds the time column (absent for undated tables); blank values are left out of a line;
    `kernels.read_log` parses it back with two regular expressions."""
    time = next((c for c in ("date", "period") if c in df.columns), None)
    cols = [c for c in df.columns if c != time]
    lines = []
    for row in df.astype(object).itertuples(index=False, name=None):
        rec = dict(zip(df.columns, row))
        pairs = " ".join(f"{c}={x}" for c in cols if (x := _log_value(rec[c])) is not None)
        stamp = _cell(rec[time]) if time is not None else None
        lines.append((f"[{time} {stamp}] " if stamp is not None else "") + f"{source}: {pairs}")
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


_SINGLE = {"csv": write_csv, "csv.gz": write_csv_gz, "parquet": write_parquet, "json": write_json,
           "jsonl": write_jsonl}


def write_observed(systems: list[ObservedSystem], data_dir: Path) -> list[FileRecord]:
    """Write every system's parts; xlsx/sqlite systems sharing a file stem share one workbook/database."""
    data_dir.mkdir(parents=True, exist_ok=True)
    records: list[FileRecord] = []
    grouped: dict[tuple[str, str], list[tuple[str, pd.DataFrame, str]]] = defaultdict(list)
    for obs in systems:
        s = obs.system
        for part in obs.parts:
            cols = [str(c) for c in part.frame.columns]
            if s.format in _SINGLE or s.format == "txt":
                name = f"{s.stem}_{part.label}.{EXT[s.format]}" if part.label else f"{s.stem}.{EXT[s.format]}"
                if s.format == "txt":
                    write_log(part.frame, data_dir / name, s.name)
                else:
                    _SINGLE[s.format](part.frame, data_dir / name)
                records.append(FileRecord(path=name, format=s.format, system=s.name, rows=len(part.frame),
                                          columns=cols))
            else:
                inner = f"{s.name}_{part.label}" if part.label else s.name
                grouped[(s.stem, s.format)].append((inner, part.frame, s.name))
                records.append(FileRecord(path=f"{s.stem}.{EXT[s.format]}", format=s.format, part=inner, system=s.name,
                                          rows=len(part.frame), columns=cols))
    for (stem, fmt), items in grouped.items():
        target = data_dir / f"{stem}.{EXT[fmt]}"
        pairs = [(inner, frame) for inner, frame, _ in items]
        (write_xlsx if fmt == "xlsx" else write_sqlite)(pairs, target)
    return records
