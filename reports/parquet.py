"""results.parquet: the rows as a table, dict fields flattened to ``<field>.<key>`` columns.

The table is written in row groups of :data:`ROW_GROUP` rows as the rows stream by
(:class:`ParquetSink`; at most :data:`BATCH` rows are held as Python dicts, the rest of a
row group as Arrow arrays), so it is never whole in memory. A Parquet file has one schema, fixed
before its first row group: the report's first pass over results.jsonl tags each row with
its shape (:meth:`Shapes.tag`: its fields and the type of each value), and
:meth:`Shapes.columns` turns the shapes of the rows kept into the columns, in the order
they first appear, each of one type:

* only strings: a string column; only booleans: a boolean column;
* only integers, in every row: int64; integers and floats, or integers some row lacks: float64
  (missing values and NaN are nulls);
* nothing but nulls: a null column;
* anything else (lists, mixed kinds): JSON text.

pyarrow is imported when a table is written, not with this module: every process that
imports ``reports`` (the harness does, for results.jsonl) would otherwise pay for it, and a
machine without pyarrow lacks only this file. At the end of a pytest run the file is written
by ``python -m reports.parquet RUN_DIR`` in a process of its own (reports.build.write_reports
``parquet_in_child``): converting to Arrow imports pandas and pyarrow, about 90 MB that would
otherwise be added to the peak memory of a large run's pytest process. The pytest run starts it
once its tests are planned (``--when-told``, :func:`reports.build.parquet_child`): it imports them
then, and converts when told, at the end.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reports.results import atomic, index_rows, naming, rows_at, tmp_of

PARQUET = "results.parquet"
ROW_GROUP = 10_000   # rows per row group
BATCH = 1_000        # rows per Arrow record batch: how many rows are held as dicts


def _missing(v: Any) -> bool:
    return v is None or (type(v) is float and math.isnan(v))


def flat_row(r: dict) -> dict[str, Any]:
    """One row with its dict fields as ``<field>.<key>`` entries."""
    f: dict[str, Any] = {}
    for k, v in r.items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                f[f"{k}.{kk}"] = vv
        else:
            f[k] = v
    return f


_KINDS = {type(None): "null", str: "str", bool: "bool", int: "int", float: "float"}   # else "json"


def _column_type(kinds: set[str]) -> str:
    values = kinds - {"null"}
    if not values:
        return "null"
    if len(values) == 1 and values <= {"str", "bool", "float", "json"}:
        return next(iter(values))
    if values == {"int"}:
        return "float" if "null" in kinds else "int"
    return "float" if values <= {"int", "float"} else "json"


class Shapes:
    """Row shapes (its fields and the types of their values), each tagged by a small int: a
    run's rows have a few hundred shapes at most, so the first pass keeps one int per row."""

    def __init__(self):
        self._ids: dict[tuple, int] = {}

    def tag(self, row: dict) -> int:
        shape = tuple((k, type(v) if type(v) is not dict else tuple((kk, type(vv)) for kk, vv in v.items()))
                      for k, v in row.items())
        return self._ids.setdefault(shape, len(self._ids))

    def columns(self, tags: Iterable[int]) -> list[tuple[str, str]]:
        """(column, type) of the table of the rows tagged ``tags``, in the order of the rows."""
        shapes = list(self._ids)
        kinds: dict[str, set[str]] = {}
        flat = []
        for t in dict.fromkeys(tags):   # each shape once, in the order it first appears
            cols = {}
            for k, typ in shapes[t]:   # flattened as flat_row does
                cols.update({f"{k}.{kk}": tt for kk, tt in typ} if type(typ) is tuple else {k: typ})
            flat.append(cols)
            for col, typ in cols.items():
                kinds.setdefault(col, set()).add(_KINDS.get(typ, "json"))
        for cols in flat:   # a column some row lacks holds nulls
            for col in kinds.keys() - cols.keys():
                kinds[col].add("null")
        return [(col, _column_type(k)) for col, k in kinds.items()]


class ParquetSink:
    """results.parquet, written row group by row group into ``<path>.tmp``: :meth:`close`
    renames it over ``path``, :meth:`abort` removes it."""

    def __init__(self, path: str | Path, columns: list[tuple[str, str]]):
        import pyarrow as pa  # heavy and optional: see the module docstring
        import pyarrow.parquet as pq
        self.pa = pa
        self.path = Path(path)
        self.columns = columns
        types = {"str": pa.large_string(), "json": pa.large_string(), "int": pa.int64(), "float": pa.float64(),
                 "bool": pa.bool_(), "null": pa.null()}
        self.schema = pa.schema([(c, types[t]) for c, t in columns])
        self.rows: list[dict] = []      # flat rows, until BATCH of them make a record batch
        self.batches: list = []         # record batches, until ROW_GROUP rows make a row group
        self.batched = 0
        self.tmp = tmp_of(self.path)
        try:
            self.file = open(self.tmp, "wb")  # noqa: SIM115 (open across row groups; closed by close/abort)
        except OSError as e:
            raise naming(e, self.path) from e
        try:
            self.writer = pq.ParquetWriter(self.file, self.schema)
        except BaseException:
            self.abort()
            raise

    def add(self, row: dict) -> None:
        self.rows.append(flat_row(row))
        if len(self.rows) >= BATCH:
            self._convert()
        if self.batched >= ROW_GROUP:
            self._flush()

    def _convert(self) -> None:
        """The rows held as dicts into one Arrow record batch (a tenth of their size, or less)."""
        if not self.rows:
            return
        arrays = []
        for (col, kind), field in zip(self.columns, self.schema):
            vals = [r.get(col) for r in self.rows]
            if kind == "json":
                vals = [None if _missing(v) else json.dumps(v, separators=(",", ":")) for v in vals]
            arrays.append(self.pa.array(vals, type=field.type, from_pandas=True))   # (NaN: null)
        self.batches.append(self.pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self.batched += len(self.rows)
        self.rows = []

    def _flush(self) -> None:
        """The batches held as one row group."""
        self._convert()
        if self.batches:
            table = self.pa.Table.from_batches(self.batches, schema=self.schema)
            self.batches, self.batched = [], 0
            self.writer.write_table(table)

    def close(self) -> Path:
        """Write the last row group and give the file its name; on an error nothing is left."""
        with atomic(self.path):
            try:
                self._flush()
            finally:
                self._close()
        return self.path

    def _close(self) -> None:
        try:
            if getattr(self, "writer", None) is not None:
                self.writer.close()
        finally:
            self.writer = None
            self.file.close()

    def abort(self) -> None:
        """Remove the unfinished file."""
        self.rows, self.batches = [], []
        with contextlib.suppress(Exception):
            self._close()
        self.tmp.unlink(missing_ok=True)


def write_parquet(run_dir: str | Path) -> Path:
    """``run_dir``/results.parquet from its results.jsonl (the last row of each pair)."""
    d = Path(run_dir)
    shapes = Shapes()
    index = index_rows(d, shapes.tag)
    sink = ParquetSink(d / PARQUET, shapes.columns(tag for _, tag in index.values()))
    try:
        for row in rows_at(d, [at for at, _ in index.values()]):
            sink.add(row)
    except BaseException:
        sink.abort()
        raise
    return sink.close()


def _when_told() -> bool:
    """``--when-told``: the modules the table needs imported now, then wait for the word on stdin
    (a pytest run starts this process before its last row, so the imports are not at its end);
    False (nothing written) when stdin closes without it."""
    import pandas  # noqa: F401 (pyarrow converts through it)
    import pyarrow.parquet  # noqa: F401
    return sys.stdin.readline().strip() == "go"


if __name__ == "__main__":   # python -m reports.parquet [--when-told] RUN_DIR
    args = sys.argv[1:]
    if args[:1] == ["--when-told"]:
        args = args[1:]
        if not _when_told():
            sys.exit(0)
    try:
        print(write_parquet(args[0]))
    except Exception as e:  # noqa: BLE001 (the parent reports it as this artefact's error)
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
