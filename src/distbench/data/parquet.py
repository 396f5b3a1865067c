"""Parquet datasets read block by block (a block = one row group), never whole.

``[data] name = "parquet"`` reads the files at ``path`` (a file, a directory or a glob,
on the local disk or any filesystem pyarrow can open from a URI: ``s3://``, ``gs://``,
``hdfs://``, ...). Features come from one list or fixed-size-list column
(``features_col = "features"``) or from several numeric columns, one feature each
(``features_col = ["a", "b"]``); labels from ``label_col`` (class indices, integral
floats such as Spark ML's doubles, or one-hot lists). The test split is ``test_path``, or
a seeded choice of whole row groups of ``path``; the validation split is empty.

Opening a dataset reads only the files' footers (and, for a variable-length list column,
the first row); :meth:`ParquetSplit.read_block` reads one row group's needed columns and
checks them, so no process ever holds the whole training set.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from distbench.data.base import DataError, check_label_range, class_indices, to_features
from distbench.data.splits import Split

GLOB_CHARS = "*?["


def _pyarrow() -> tuple[Any, Any, Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.fs as pafs
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError("data.name = 'parquet' needs pyarrow, which is not installed: pip install pyarrow "
                        "(or install distbench with its 'spark' extra)") from None
    return pa, pc, pafs, pq


@dataclass
class ParquetFiles:
    """The Parquet files one path names, with their footers (read once).

    Attributes:
        spec: the path as configured (for messages).
        filesystem: the ``pyarrow.fs.FileSystem`` holding them.
        paths: file paths on ``filesystem``, sorted.
        metas: each file's ``pyarrow.parquet.FileMetaData``.
        digests: each file's footer digest: SHA-256 of its size and raw footer bytes.
        partitions: each file's Hive partition columns (``label=3/part-0.parquet`` under
            the directory: ``{"label": "3"}``), for a directory; ``None`` otherwise.
    """

    spec: str
    filesystem: Any
    paths: list[str]
    metas: list[Any]
    digests: list[str]
    partitions: list[dict[str, str]] | None = None

    def partition(self, i: int, key: str) -> str | None:
        """File ``i``'s value of Hive partition column ``key`` (its ``key=value`` folder), or ``None``."""
        return (self.partitions[i] if self.partitions else {}).get(key)

    @classmethod
    def open(cls, spec: str, key: str = "data.path") -> "ParquetFiles":
        """Resolve ``spec`` (file, directory or glob; local path or URI) and read every footer.

        A directory means every file below it, except names starting with ``.`` or ``_``
        (Spark's ``_SUCCESS``, hidden files), as ``pyarrow.dataset`` does. A glob matches
        ``*``, ``?`` and ``[...]`` within one path component.

        Raises:
            DataError: nothing at ``spec``, a glob or directory matching no file, a file
                that is not Parquet.
        """
        _, _, pafs, _ = _pyarrow()
        partitions: list[dict[str, str]] = []
        try:
            if "://" in spec:
                fs, path = pafs.FileSystem.from_uri(spec)
            else:
                fs, path = pafs.LocalFileSystem(), str(PurePosixPath(os.path.abspath(os.path.expanduser(spec))))
            if any(c in path for c in GLOB_CHARS):
                paths = _glob(fs, path)
                if not paths:
                    raise DataError(f"{key} = {spec!r}: the glob matches no files; check the pattern "
                                    "(*, ? and [...] match within one folder name)")
            else:
                info = fs.get_file_info(path)
                if info.type == pafs.FileType.NotFound:
                    raise DataError(f"{key} = {spec!r}: no such file or directory")
                if info.type == pafs.FileType.Directory:
                    paths = _listing(fs, path)
                    if not paths:
                        raise DataError(f"{key} = {spec!r}: the directory holds no data files")
                    partitions = [_hive(str(PurePosixPath(p).relative_to(path))) for p in paths]
                else:
                    paths = [path]
        except (OSError, ValueError) as e:  # pyarrow's ArrowException subclasses these
            if isinstance(e, DataError):
                raise
            raise DataError(f"{key} = {spec!r}: cannot list it: {_oneline(e)}") from None
        metas, digests = [], []
        for p in paths:
            meta, digest = _footer(fs, p)
            metas.append(meta)
            digests.append(digest)
        return cls(spec, fs, paths, metas, digests, partitions if any(partitions) else None)

    def schema(self, i: int) -> Any:
        """File ``i``'s Arrow schema."""
        return self.metas[i].schema.to_arrow_schema()

    def row_groups(self) -> list[tuple[int, int, int]]:
        """Every non-empty row group as ``(file, row group, rows)``, in storage order."""
        return [(f, g, m.row_group(g).num_rows) for f, m in enumerate(self.metas)
                for g in range(m.num_row_groups) if m.row_group(g).num_rows > 0]

    def batches(self, f: int, g: int, columns: list[str], rows: int) -> Iterator[Any]:
        """Row group ``g`` of file ``f``, only ``columns``, as ``pyarrow.RecordBatch`` es of ``rows`` rows.

        Decoding a row group in record batches bounds pyarrow's decoding buffers by the
        batch, not the row group: reading a 100 MB row group of a fixed-size-list column
        whole peaked at 7-8x its size here, in 1,024-row batches at 2-3x. Local files are
        read in 1 MB buffered reads; remote ones pre-buffered (coalesced requests).
        """
        _, _, pafs, pq = _pyarrow()
        local = isinstance(self.filesystem, pafs.LocalFileSystem)
        try:
            with pq.ParquetFile(self.paths[f], filesystem=self.filesystem, metadata=self.metas[f],
                                pre_buffer=not local, buffer_size=(1 << 20) if local else 0) as pf:
                yield from pf.iter_batches(batch_size=rows, row_groups=[g], columns=columns)
        except (OSError, ValueError) as e:
            raise DataError(f"{self.paths[f]} row group {g}: cannot read it: {_oneline(e)}") from None

    def read(self, f: int, g: int, columns: list[str]) -> Any:
        """Row group ``g`` of file ``f``, only ``columns``, as one ``pyarrow.Table`` (for small columns)."""
        pa, _, _, _ = _pyarrow()
        batches = list(self.batches(f, g, columns, 1 << 16))
        return pa.Table.from_batches(batches) if batches else None


def _oneline(e: BaseException) -> str:
    return " ".join(str(e).split())[:300]


def _hive(rel: str) -> dict[str, str]:
    """The ``key=value`` folders of a file's path relative to the dataset's directory (Hive
    partitioning, as Spark's ``df.write.partitionBy(...)`` writes it)."""
    out = {}
    for part in PurePosixPath(rel).parts[:-1]:
        k, eq, v = part.partition("=")
        if eq and k:
            out[k] = v
    return out


def _hidden(rel: str) -> bool:
    return any(part.startswith((".", "_")) for part in PurePosixPath(rel).parts)


def _listing(fs: Any, base: str) -> list[str]:
    """Files below directory ``base`` (recursive), without hidden ones, sorted."""
    _, _, pafs, _ = _pyarrow()
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File
                  and not _hidden(str(PurePosixPath(i.path).relative_to(base))))


def _glob(fs: Any, pattern: str) -> list[str]:
    """Files matching ``pattern`` (glob characters within path components), sorted."""
    _, _, pafs, _ = _pyarrow()
    parts = PurePosixPath(pattern).parts
    fixed = next(i for i, p in enumerate(parts) if any(c in p for c in GLOB_CHARS))
    base = str(PurePosixPath(*parts[:fixed])) if fixed else "."
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File
                  and len(PurePosixPath(i.path).parts) == len(parts) and PurePosixPath(i.path).match(pattern))


def _footer(fs: Any, path: str) -> tuple[Any, str]:
    """File ``path``'s metadata and footer digest (SHA-256 of its size and raw footer bytes)."""
    _, _, _, pq = _pyarrow()
    try:
        with fs.open_input_file(path) as f:
            size = f.size()
            f.seek(max(size - 8, 0))
            tail = f.read(8)
            length = int.from_bytes(tail[:4], "little") if len(tail) == 8 else -1
            if tail[4:] != b"PAR1" or not 0 < length <= size - 12:
                raise DataError(f"{path}: not a Parquet file (no valid PAR1 footer; {size} bytes); "
                                "data.path must name Parquet files only")
            f.seek(size - 8 - length)
            raw = f.read(length)
            f.seek(0)
            meta = pq.ParquetFile(f).metadata
    except (OSError, ValueError) as e:
        if isinstance(e, DataError):
            raise
        raise DataError(f"{path}: cannot read it as Parquet: {_oneline(e)}") from None
    return meta, hashlib.sha256(size.to_bytes(8, "little") + raw).hexdigest()


# ----------------------------------------------------------------- the reader
@dataclass(frozen=True)
class Reader:
    """How a row group's columns become ``(x, y)``; the same for the train and test files.

    Attributes:
        features: the feature column (one list column) or the numeric feature columns.
        list_column: ``True`` when ``features`` is one list/fixed-size-list column.
        flat_length: features per row (the flat vector's length).
        sample_shape: the shape each row's features are reshaped to.
        label: the label column.
        onehot: the one-hot width when labels are lists, else ``None``.
        num_classes: number of classes.
        scaled: ``True`` when features are ``uint8`` (scaled by 1/255).
        label_in_path: the label is a Hive partition column (``label=3/`` folders), not
            stored in the files.
    """

    features: tuple[str, ...]
    list_column: bool
    flat_length: int
    sample_shape: tuple[int, ...]
    label: str
    onehot: int | None
    num_classes: int
    scaled: bool
    label_in_path: bool = False

    @property
    def columns(self) -> list[str]:
        """The columns to read from a file: the features, and the label unless it is in the path."""
        return [*self.features] + ([] if self.label_in_path else [self.label])

    def describe(self) -> dict[str, Any]:
        """The reader as JSON-able facts (recorded, and part of the fingerprint)."""
        return {"features_col": list(self.features) if not self.list_column else self.features[0],
                "label_col": self.label, "feature_length": self.flat_length,
                "sample_shape": list(self.sample_shape), "labels": "one-hot" if self.onehot else "class indices",
                "num_classes": self.num_classes, "features_scaled": "1/255 (uint8)" if self.scaled else "none",
                **({"label_from": "Hive partition folders"} if self.label_in_path else {})}

    @property
    def batch_rows(self) -> int:
        """Rows per record batch when decoding a row group: about 16 MB of features, 1..65,536 rows."""
        return max(1, min(1 << 16, (16 << 20) // (4 * self.flat_length)))

    def convert(self, table: Any, where: str, first_row: int = 0, label: int | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """Rows of one row group (a ``pyarrow`` table or record batch) as checked ``(x float32, y int32)``.

        Args:
            table: the feature and label columns of some rows of a row group.
            where: the row group, for messages.
            first_row: the number of ``table``'s first row in the row group.
            label: every row's class when the label is a partition column (``label_in_path``).

        Raises:
            DataError: nulls, mixed list lengths, NaN/Inf features, bad labels (naming ``where`` and the row).
        """
        rows = table.num_rows
        at = (where, first_row)
        if self.list_column:
            x = _list_values(table.column(self.features[0]), self.flat_length, *at,
                             f"feature column {self.features[0]!r}")
        else:
            x = np.column_stack([_scalars(table.column(c), *at, f"feature column {c!r}") for c in self.features])
        x = to_features(x.reshape(rows, *self.sample_shape), where, first_row)
        if self.label_in_path:
            return x, np.full(rows, label, np.int32)
        col = table.column(self.label)
        if self.onehot:
            y = _list_values(col, self.onehot, *at, f"one-hot label column {self.label!r}")
        else:
            y = _scalars(col, *at, f"label column {self.label!r}")
        y, _ = class_indices(y, where, first_row)
        check_label_range(y, self.num_classes, where, first_row)
        return x, y.astype(np.int32)


def _nulls(arr: Any, where: str, first_row: int, what: str, per_row: int = 1) -> None:
    if arr.null_count:
        r = first_row + int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0]) // per_row
        raise DataError(f"{where}: row {r} of {what} is null ({arr.null_count} nulls); drop or fill them")


def _scalars(col: Any, where: str, first_row: int, what: str) -> np.ndarray:
    arr = col.combine_chunks() if hasattr(col, "combine_chunks") else col
    _nulls(arr, where, first_row, what)
    return arr.to_numpy(zero_copy_only=False)


def _list_values(col: Any, length: int, where: str, first_row: int, what: str) -> np.ndarray:
    """A list or (nested) fixed-size-list column as a ``(rows, length)`` array, lengths checked."""
    pa, pc, _, _ = _pyarrow()
    arr = col.combine_chunks() if hasattr(col, "combine_chunks") else col
    _nulls(arr, where, first_row, what)
    if not pa.types.is_fixed_size_list(arr.type):
        lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(lengths != length)
        if bad.size:
            r = int(bad[0])
            raise DataError(f"{where}: {what} holds lists of mixed lengths: row {first_row + r} has {int(lengths[r])} "
                            f"values, "
                            f"expected {length} like the first row; every row needs the same number of values")
    values, per_row = arr, 1  # per_row: items of `values` per table row
    while pa.types.is_fixed_size_list(values.type) or pa.types.is_list(values.type) \
            or pa.types.is_large_list(values.type):
        per_row = per_row * values.type.list_size if pa.types.is_fixed_size_list(values.type) else length
        values = values.flatten()
        _nulls(values, where, first_row, what, per_row)
    return values.to_numpy(zero_copy_only=False).reshape(len(arr), length)


def _leaf(t: Any) -> tuple[Any, list[int]]:
    """A type's leaf value type and its fixed-size-list dimensions (``-1`` for a variable list)."""
    pa, _, _, _ = _pyarrow()
    dims = []
    while pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        dims.append(t.list_size if pa.types.is_fixed_size_list(t) else -1)
        t = t.value_type
    return t, dims


def _numeric(t: Any) -> bool:
    pa, _, _, _ = _pyarrow()
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _stringy(t: Any) -> bool:
    pa, _, _, _ = _pyarrow()
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)


def _column(schema: Any, name: str, files: ParquetFiles, key: str) -> Any:
    if name not in schema.names:
        folders = sorted({k for part in (files.partitions or []) for k in part})
        raise DataError(f"{key} = {name!r}: {files.paths[0]} has no such column; its columns are "
                        + ", ".join(schema.names)
                        + (f", and its partition folders give {', '.join(folders)}" if folders else ""))
    return schema.field(name).type


def _first_row_length(files: ParquetFiles, column: str) -> int:
    """Values in the first row of variable-length list column ``column`` (reads that column of one row group)."""
    pa, pc, _, _ = _pyarrow()
    f, g, _ = files.row_groups()[0]
    arr = next(files.batches(f, g, [column], 1)).column(column)
    if arr.is_null()[0].as_py():
        raise DataError(f"{files.paths[f]} row group {g}: row 0 of column {column!r} is null; drop or fill it")
    return int(pc.list_value_length(arr[:1])[0].as_py())


def _same_type(a: Any, b: Any) -> bool:
    """Types agree up to list field names (``item`` vs ``element``): same leaf type and list sizes."""
    return _leaf(a) == _leaf(b)


def _other_columns(files: ParquetFiles, columns: list[str], label_col: str) -> str | list[str]:
    """The default ``features_col``: every column but ``label_col`` and pandas' index columns,
    as ``compare`` reads a DataFrame (user test, helper-37: a pandas table needed each of its
    20 columns listed); one such column by its name (it may be a list column).

    Raises:
        DataError: no column but the label.
    """
    others = [n for n in columns if n != label_col and not n.startswith("__index_level_")]
    if not others:
        raise DataError(f"data.path = {files.spec!r}: no column but the label {label_col!r}; name the feature "
                        f"column(s) in data.features_col (its columns: {', '.join(columns)})")
    return others[0] if len(others) == 1 else others


def make_reader(files: ParquetFiles, features_col: str | list[str], label_col: str,
                feature_shape: list[int], classes: int, extra: list[ParquetFiles]) -> Reader:
    """Check the schema of ``files`` (and of ``extra``: the test files) and build the :class:`Reader`.

    Args:
        files: the training files.
        features_col: one list column, or a list of numeric columns; empty: every column
            but ``label_col`` and pandas' index columns.
        label_col: the label column.
        feature_shape: reshape target for each flat feature vector ([] = as stored).
        classes: the configured number of classes (0 = infer from the labels).
        extra: other files read with the same reader (their schemas must agree).

    Raises:
        DataError: a missing column (listing the file's columns), a column of the wrong
            type (string labels, non-numeric features), schemas that differ between files,
            an empty dataset, a ``feature_shape`` that does not fit, fewer than 2 classes.
    """
    pa, _, _, _ = _pyarrow()
    schema = files.schema(0)
    key = "data.features_col" if features_col else f"data.features_col (not set: every column but {label_col!r})"
    features_col = features_col or _other_columns(files, schema.names, label_col)
    names = [features_col] if isinstance(features_col, str) else list(features_col)
    types = [_column(schema, n, files, "data.features_col") for n in names]
    in_path = label_col not in schema.names and files.partition(0, label_col) is not None
    label_type = pa.int64() if in_path else _column(schema, label_col, files, "data.label_col")
    _check_schemas(files, extra, [*names] + ([] if in_path else [label_col]), label_col if in_path else None)
    total = sum(m.num_rows for m in files.metas)
    if total == 0:
        raise DataError(f"data.path = {files.spec!r}: the dataset is empty (0 rows in {len(files.paths)} file(s))")
    list_column = isinstance(features_col, str) and not _numeric(types[0])
    if list_column:
        leaf, dims = _leaf(types[0])
        if not dims or not _numeric(leaf) or (-1 in dims and len(dims) > 1):
            raise DataError(f"{key} = {features_col!r} has type {types[0]}; expected a list or "
                            "fixed-size list of numbers (nested lists only of fixed sizes), or name numeric "
                            'columns, one feature each: features_col = ["a", "b", ...]')
        stored = tuple(dims) if dims[0] != -1 else (_first_row_length(files, names[0]),)
    else:
        for n, t in zip(names, types):
            if not _numeric(t):
                numeric = [m for m, u in zip(names, types) if _numeric(u)]  # helper-38: a key never set, unexplained
                raise DataError(f"{key}: column {n!r} has type {t}; each feature column must hold one number per row "
                                "(integers or floats)" + (f"; list the numeric ones, e.g. features_col = {numeric[:4]}"
                                                          if numeric and key != "data.features_col" else ""))
        leaf, stored = types[0], (len(names),)
        if any(t != leaf for t in types):
            leaf = None
    flat = int(np.prod(stored))
    shape = tuple(feature_shape) or stored
    if math.prod(shape) != flat:
        raise DataError(f"data.feature_shape = {list(feature_shape)}: holds {math.prod(shape)} values per row, "
                        f"but each row has {flat} features; give a shape whose sizes multiply to {flat}")
    onehot = None
    if _stringy(label_type):
        raise DataError(f"data.label_col = {label_col!r}: labels are strings (type {label_type}); string "
                        "labels are not supported: encode them as class indices 0..k-1 (e.g. Spark ML's "
                        "StringIndexer) or one-hot")
    if not _numeric(label_type):
        lleaf, ldims = _leaf(label_type)
        if len(ldims) != 1 or not _numeric(lleaf):
            raise DataError(f"data.label_col = {label_col!r} has type {label_type}; expected class indices "
                            "(integers) or one-hot lists of numbers")
        onehot = ldims[0] if ldims[0] != -1 else _first_row_length(files, label_col)
        if onehot == 1:
            raise DataError(f"data.label_col = {label_col!r} holds lists of one value (type {label_type}): expected "
                            "class indices (one integer per row) or one-hot lists with one entry per class; for "
                            "class indices store the value itself, not a one-element list")
    num_classes = classes or onehot or (max(_partition_label(fl, i, label_col) for fl in [files, *extra]
                                            for i in range(len(fl.paths))) if in_path
                                        else _max_label(files, label_col, extra)) + 1
    if onehot and classes and classes != onehot:
        raise DataError(f"data.classes = {classes} but the one-hot labels in {label_col!r} have width {onehot}; "
                        "remove data.classes or fix it")
    if num_classes < 2:
        raise DataError(f"data.label_col = {label_col!r}: every label is 0, a single class; a classifier needs "
                        "at least 2 classes (set data.classes if some classes are absent from the data)")
    scaled = leaf is not None and pa.types.is_uint8(leaf)
    return Reader(tuple(names), list_column, flat, shape, label_col, onehot, int(num_classes), scaled, in_path)


def _check_schemas(files: ParquetFiles, extra: list[ParquetFiles], columns: list[str], path_label: str | None
                   ) -> None:
    """Every file of ``files`` and ``extra`` has ``columns`` with the first file's types (and,
    with ``path_label``, a class index in its partition folder); raises DataError naming the file."""
    schema = files.schema(0)
    for fl in [files, *extra]:
        for i in range(len(fl.paths)):
            other = fl.schema(i)
            if path_label:
                _partition_label(fl, i, path_label)
            for n in columns:
                if n not in other.names:
                    raise DataError(f"{fl.paths[i]} has no column {n!r}, which {files.paths[0]} has (type "
                                    f"{schema.field(n).type}); every file must have the same schema")
                if not _same_type(other.field(n).type, schema.field(n).type):
                    raise DataError(f"{fl.paths[i]}: column {n!r} is {other.field(n).type}, but {files.paths[0]} "
                                    f"has {schema.field(n).type}; every file must have the same schema")


def _partition_label(files: ParquetFiles, i: int, key: str) -> int:
    """File ``i``'s class index from its ``key=value`` partition folder.

    Raises:
        DataError: the file has no such folder, or its value is not a class index.
    """
    v = files.partition(i, key)
    if v is None:
        raise DataError(f"{files.paths[i]}: no {key}=... folder above it, though other files of {files.spec!r} take "
                        f"data.label_col = {key!r} from such folders; every file needs one")
    try:
        f = float(v)
    except ValueError:
        f = math.nan
    if not (math.isfinite(f) and f == int(f) and f >= 0):
        raise DataError(f"{files.paths[i]}: partition folder {key}={v}: labels must be class indices 0..k-1 "
                        "(string labels are not supported: encode them, e.g. with Spark ML's StringIndexer)")
    return int(f)


def _max_label(files: ParquetFiles, label: str, extra: list[ParquetFiles]) -> int:
    """The largest class index: from the row groups' column statistics, else by reading the label column."""
    best = 0.0
    for fl in [files, *extra]:
        for f, g, _ in fl.row_groups():
            rg = fl.metas[f].row_group(g)
            col = next(rg.column(i) for i in range(rg.num_columns) if rg.column(i).path_in_schema == label)
            st = col.statistics
            if st is not None and st.has_min_max:
                best = max(best, float(st.max))
            else:
                y = _scalars(fl.read(f, g, [label]).column(label), f"{fl.paths[f]} row group {g}", 0, label)
                finite = y[np.isfinite(y.astype(np.float64))]
                best = max(best, float(finite.max(initial=0)))
    return int(math.floor(best)) if math.isfinite(best) else 0


# ------------------------------------------------------------------ the split
BLOCK_BYTES = 128 << 20
"""The most decoded feature bytes one block holds: a larger row group (pandas and pyarrow
write up to a million rows in one) is read as consecutive row ranges of at most this size."""


class ParquetSplit(Split):
    """Row groups of Parquet files, read one block at a time: a block is one row group, or a
    range of rows of one when the group's features exceed :data:`BLOCK_BYTES` decoded (a
    range is decoded from the group's start, the rows before it dropped batch by batch: the
    memory stays one block, the reading grows with the group; row groups of 16-128 MB are
    read once per epoch).

    Args:
        files: the files the row groups belong to.
        reader: how to turn a row group into ``(x, y)``.
        groups: the split's row groups as ``(file, row group, rows)``, in storage order
            (``rows``: the rows of the group this split takes).
        masks: per group, ``None`` (every row) or a boolean array over the group's rows
            (the rows this split takes: :func:`held_out_rows`).
    """

    in_memory = False

    def __init__(self, files: ParquetFiles, reader: Reader, groups: list[tuple[int, int, int]],
                 masks: list[np.ndarray | None] | None = None) -> None:
        self.files, self.reader, self.groups = files, reader, list(groups)
        self.masks = list(masks) if masks is not None else [None] * len(self.groups)
        cap = max(1, BLOCK_BYTES // (4 * max(1, int(np.prod(reader.sample_shape)))))
        self.blocks: list[tuple[int, int, int]] = []  # (index into groups, first row, end row) of the group
        sizes = []
        for i, (f, g, _) in enumerate(self.groups):
            total, mask = files.metas[f].row_group(g).num_rows, self.masks[i]
            for a in range(0, total, cap):
                b = min(total, a + cap)
                taken = b - a if mask is None else int(mask[a:b].sum())
                if taken:
                    self.blocks.append((i, a, b))
                    sizes.append(taken)
        self._sizes = np.array(sizes, dtype=np.int64)

    def __len__(self) -> int:
        return int(self._sizes.sum())

    def __repr__(self) -> str:
        return f"ParquetSplit({self.files.spec!r}: {len(self)} rows in {len(self.groups)} row groups, " \
               f"{len(self.blocks)} blocks)"

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return self.reader.sample_shape

    def block_sizes(self) -> np.ndarray:
        return self._sizes

    def read_block(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Block ``i`` (its rows of one row group): reads only the feature and label columns,
        checks every value."""
        if not 0 <= i < len(self.blocks):
            raise IndexError(f"block {i} of a split with {len(self.blocks)} blocks")
        gi, a, b = self.blocks[i]
        f, g, _ = self.groups[gi]
        mask = self.masks[gi]
        total = self.files.metas[f].row_group(g).num_rows
        where = f"{self.files.paths[f]} row group {g}"
        label = _partition_label(self.files, f, self.reader.label) if self.reader.label_in_path else None
        x = np.empty((b - a, *self.reader.sample_shape), np.float32)
        y = np.empty(b - a, np.int32)
        pos = 0  # rows of the group passed
        for batch in self.files.batches(f, g, self.reader.columns, self.reader.batch_rows):
            k = batch.num_rows
            lo, hi = max(a, pos), min(b, pos + k)
            if lo < hi:
                part = batch.slice(lo - pos, hi - lo) if (lo, hi) != (pos, pos + k) else batch
                x[lo - a:hi - a], y[lo - a:hi - a] = self.reader.convert(part, where, lo, label)
            pos += k
            if pos >= b:
                break
        if pos < b or (b == total and pos != total):
            raise DataError(f"{where}: holds other than the {total} rows its footer says; the file changed "
                            "while being read: start a new run")
        return (x, y) if mask is None else (x[mask[a:b]], y[mask[a:b]])

    def hash_into(self, h: Any) -> None:
        """The reader (columns, shape, classes) and each row group's file footer digest, index and rows."""
        h.update(json.dumps(self.reader.describe(), sort_keys=True).encode())
        for (f, g, rows), mask in zip(self.groups, self.masks):
            h.update(f"{self.files.digests[f]}:{g}:{rows}:{(self.files.partitions or [{}] * (f + 1))[f]};".encode())
            if mask is not None:
                h.update(np.packbits(mask).tobytes())

    def describe(self) -> dict[str, Any]:
        return {"path": self.files.spec, "files": len(self.files.paths), "rows": len(self),
                "row_groups": len(self.groups), "blocks": len(self.blocks), "in_memory": False}


def held_out_rows(files: ParquetFiles, reader: Reader, fraction: float, seed: int
                  ) -> tuple[ParquetSplit, ParquetSplit, dict[str, Any]]:
    """Split the rows of ``files`` into ``(train, test)``: a seeded, stratified choice of
    rows as the test split, made while streaming (one row group's label column at a time).

    For each class, the test split holds ``round(fraction x rows of that class so far)``
    rows after each row group (in storage order), so each class is held out in proportion
    over the whole dataset, whatever the row groups hold (one group of everything as
    pandas and pyarrow write by default, or one class per file as a Spark job partitioned
    by the label writes); which rows of a group are held out is drawn with
    ``numpy.random.default_rng([seed, file, row group, class])``. Every process computes
    the same split from the same files.

    Returns:
        (train split, test split, facts to record: method, rows, fraction, rows per class).

    Raises:
        DataError: too few rows to hold any out, or to leave any for training; a bad label.
    """
    groups = files.row_groups()
    seen: dict[int, int] = {}
    held: dict[int, int] = {}
    train_g, test_g, train_m, test_m = [], [], [], []
    for f, g, rows in groups:
        where = f"{files.paths[f]} row group {g}"
        if reader.label_in_path:
            y = np.full(rows, _partition_label(files, f, reader.label), np.int32)
        else:
            y = np.concatenate([_labels(reader, b, where) for b in files.batches(f, g, [reader.label], 1 << 20)])
        mask = np.zeros(rows, bool)
        for c in np.unique(y):
            idx = np.flatnonzero(y == c)
            seen[int(c)] = seen.get(int(c), 0) + idx.size
            k = int(round(fraction * seen[int(c)])) - held.get(int(c), 0)
            k = max(0, min(k, idx.size))
            held[int(c)] = held.get(int(c), 0) + k
            mask[np.random.default_rng([seed, f, g, int(c)]).choice(idx, size=k, replace=False)] = True
        if (~mask).any():
            train_g.append((f, g, int((~mask).sum())))
            train_m.append(~mask if mask.any() else None)
        if mask.any():
            test_g.append((f, g, int(mask.sum())))
            test_m.append(mask if not mask.all() else None)
    total, n_test = sum(seen.values()), sum(held.values())
    if not n_test or n_test == total:
        raise DataError(f"data.path = {files.spec!r}: {total} rows are too few to hold out data.test_fraction = "
                        f"{fraction} of them and keep the rest for training; add rows or set data.test_path")
    facts = {"method": "rows, stratified by label, drawn with numpy.random.default_rng([seed, file, row group, "
                       "class]) while streaming", "rows": n_test, "fraction": round(n_test / total, 6),
             "rows_per_class": {str(c): held[c] for c in sorted(held)}}
    return (ParquetSplit(files, reader, train_g, train_m), ParquetSplit(files, reader, test_g, test_m), facts)


def _labels(reader: Reader, batch: Any, where: str) -> np.ndarray:
    """A record batch's label column as checked class indices."""
    col = batch.column(reader.label)
    y = (_list_values(col, reader.onehot, where, 0, f"one-hot label column {reader.label!r}") if reader.onehot
         else _scalars(col, where, 0, f"label column {reader.label!r}"))
    y, _ = class_indices(y, where, 0)
    check_label_range(y, reader.num_classes, where, 0)
    return y.astype(np.int32)
