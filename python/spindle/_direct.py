"""Direct mode: the process reads its own splits, described by a JSON file.

The file's format is in docs/feed-protocol.md. Arrow IPC files and CSV are
read with the built-in readers; Parquet, and any ``hdfs://`` file, need
pyarrow. With pyarrow installed every format is read with it.
"""

import csv
import io
import json
import urllib.parse

import numpy as np

from . import _arrow
from ._columns import concat, from_pyarrow_array, from_pyarrow_batch
from ._errors import FeedError

DIRECT_VERSION = 1

_FORMATS = {"parquet": "parquet", "pq": "parquet", "arrow": "arrow", "ipc": "arrow", "feather": "arrow",
            "csv": "csv", "tsv": "csv"}

# even_batches values, as the Go side parses them, by meaning.
_EVEN_MODES = {"pad": "pad", "true": "pad", "on": "pad", "drop": "drop", "off": "off", "false": "off",
               "none": "off"}


class Split:
    """One piece of one input file assigned to this rank."""

    __slots__ = ("index", "uri", "format", "row_groups", "batches", "offset", "length", "rows", "row_offset")

    def __init__(self, index, uri, fmt, row_groups, batches, offset, length, rows, row_offset=0):
        self.index = index
        self.uri = uri
        self.format = fmt
        self.row_groups = row_groups
        self.batches = batches
        self.offset = offset
        self.length = length
        self.rows = rows
        self.row_offset = row_offset

    def __repr__(self):
        return f"split {self.index} ({self.uri})"


class DirectSpec:
    """The parsed direct-mode JSON file."""

    def __init__(self, path, doc):
        self.path = path

        def get(key, kind, default=None, required=False):
            if key not in doc or doc[key] is None:
                if required:
                    raise FeedError(f"direct feed spec {path}: key {key!r} is missing")
                return default
            value = doc[key]
            if kind is int and isinstance(value, bool) or not isinstance(value, kind):
                raise FeedError(f"direct feed spec {path}: key {key!r} is {value!r}, want {kind.__name__}")
            return value

        self.version = get("version", int, required=True)
        if self.version > DIRECT_VERSION:
            raise FeedError(f"direct feed spec {path}: version {self.version} is newer than this package reads "
                            f"({DIRECT_VERSION}); upgrade the spindle Python package")
        self.rank = get("rank", int, 0)
        self.world_size = get("world_size", int, 1)
        self.epochs = get("epochs", int, 1)
        self.batch_rows = get("batch_rows", int, 1024)
        self.columns = [str(c) for c in get("columns", list, [])]
        self.label_column = get("label_column", str, "") or None
        self.shuffle = get("shuffle", bool, False)
        self.seed = get("seed", int, 0)
        self.even_batches = _EVEN_MODES.get(str(get("even_batches", str, "") or "pad").strip().lower(), "?")
        self.target_batches = get("target_batches", int, 0)
        self.epoch_rows = get("epoch_rows", int, 0)
        # The executor works these out by the Go rules (feed.EpochRowLimit):
        # rows per epoch under even batches (0: this rank's own rows, once)
        # and the shuffle window; rows and order follow (see _epoch_rows).
        self.epoch_row_limit = get("epoch_row_limit", int, 0)
        self.shuffle_buffer_rows = get("shuffle_buffer_rows", int, required=self.shuffle) or 0
        # Where a resumed feed starts: this epoch, without its first batches.
        self.start_epoch = get("start_epoch", int, 0)
        self.start_batch = get("start_batch", int, 0)
        csv_opts = get("csv", dict, {})
        # Empty picks it by the file name (tab for .tsv, comma otherwise).
        self.csv_delimiter = str(csv_opts.get("delimiter", "") or "")
        self.csv_header = bool(csv_opts.get("header", True))
        checks = [
            (self.world_size >= 1, f"world_size {self.world_size}: need at least 1"),
            (0 <= self.rank < self.world_size, f"rank {self.rank} is outside 0..{self.world_size - 1}"),
            (self.epochs >= 1, f"epochs {self.epochs}: need at least 1"),
            (self.batch_rows >= 1, f"batch_rows {self.batch_rows}: need at least 1"),
            (len(self.csv_delimiter) <= 1, f"csv delimiter {self.csv_delimiter!r} is not one character"),
            (self.even_batches != "?", f"even_batches {doc.get('even_batches')!r}: want pad, drop or off"),
            (self.target_batches >= 0, f"target_batches {self.target_batches}: must not be negative"),
            (self.epoch_rows >= 0, f"epoch_rows {self.epoch_rows}: must not be negative"),
            (self.epoch_row_limit >= 0, f"epoch_row_limit {self.epoch_row_limit}: must not be negative"),
            (self.shuffle_buffer_rows >= 0, f"shuffle_buffer_rows {self.shuffle_buffer_rows}: must not be negative"),
            (self.start_epoch >= 0 and self.start_batch >= 0,
             f"start at epoch {self.start_epoch} batch {self.start_batch}: must not be negative"),
        ]
        for ok, msg in checks:
            if not ok:
                raise FeedError(f"direct feed spec {path}: {msg}")
        self.splits = []
        for i, s in enumerate(get("splits", list, [])):
            if not isinstance(s, dict) or not s.get("uri"):
                raise FeedError(f"direct feed spec {path}: split {i} has no uri")
            fmt = _FORMATS.get(str(s.get("format", "")).strip().lower())
            if fmt is None:
                raise FeedError(f"direct feed spec {path}: split {i} ({s['uri']}): unknown format "
                                f"{s.get('format')!r} (want parquet, arrow or csv)")
            try:
                self.splits.append(Split(i, s["uri"], fmt, [int(x) for x in s.get("row_groups") or []],
                                         [int(x) for x in s.get("batches") or []], int(s.get("offset") or 0),
                                         int(s.get("length") or 0), int(s.get("rows") or 0),
                                         int(s.get("row_offset") or 0)))
            except (TypeError, ValueError) as e:
                raise FeedError(f"direct feed spec {path}: split {i} ({s['uri']}): {e}") from None

    def delimiter_for(self, split):
        """Return the CSV delimiter of split's file: the configured one, else by its name."""
        if self.csv_delimiter:
            return self.csv_delimiter
        base = urllib.parse.urlparse(split.uri).path.lower()
        ext = _codec_ext(split.uri)
        if ext:
            base = base[:-len(ext)]
        return "\t" if base.endswith((".tsv", ".tab")) else ","


def load_spec(path):
    """Read and check the direct-mode JSON at path."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise FeedError(f"read direct feed spec {path} (SPINDLE_FEED): {e}") from None
    except ValueError as e:
        raise FeedError(f"read direct feed spec {path}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise FeedError(f"read direct feed spec {path}: not a JSON object")
    return DirectSpec(path, doc)


def _local_path(uri):
    """Return the local path of a file:// URI or plain path, or None for another scheme."""
    if "://" not in uri:
        return uri
    u = urllib.parse.urlparse(uri)
    if u.scheme == "file" and u.netloc in ("", "localhost"):
        return urllib.parse.unquote(u.path)
    return None


class _Files:
    """Opens split files, locally or through pyarrow's file systems."""

    def __init__(self, use_pyarrow):
        self.use_pyarrow = use_pyarrow

    def open(self, split):
        f = self._open_raw(split)
        if split.format != "csv":
            return f
        try:
            return _decompressed(f, split)
        except BaseException:
            f.close()
            raise

    def _open_raw(self, split):
        path = _local_path(split.uri)
        if path is not None:
            try:
                return open(path, "rb")
            except OSError as e:
                raise FeedError(f"{split}: {e}") from None
        if not self.use_pyarrow:
            raise FeedError(f"{split}: reading {urllib.parse.urlparse(split.uri).scheme}:// files in direct mode "
                            "needs pyarrow, which is not installed (use --feed arrow or --feed tensor)")
        import pyarrow.fs

        try:
            fs, p = pyarrow.fs.FileSystem.from_uri(split.uri)
            native = fs.open_input_file(p)
        except Exception as e:  # pyarrow raises several types (ArrowException, OSError)
            raise FeedError(f"{split}: open with pyarrow: {e}") from None
        return io.BufferedReader(_RawNative(native), buffer_size=1 << 20)


# Compression by file name, as Hadoop's codecs name it (see the Go reader).
_UNREADABLE_CODECS = {".snappy": "SnappyCodec", ".lz4": "Lz4Codec", ".lzo": "LzoCodec",
                      ".lzo_deflate": "LzoCodec", ".br": "Brotli", ".xz": "XZ"}


def _codec_ext(uri):
    base = urllib.parse.urlparse(uri).path.lower()
    for ext in (".gz", ".bz2", ".zst", ".deflate", *_UNREADABLE_CODECS):
        if base.endswith(ext):
            return ext
    return ""


def _decompressed(f, split):
    """Return a readable, seekable file of f's decompressed text (f itself when not compressed)."""
    ext = _codec_ext(split.uri)
    if not ext:
        return f
    if ext in (".gz", ".bz2"):
        import bz2
        import gzip

        base = gzip.GzipFile if ext == ".gz" else bz2.BZ2File

        class Owning(base):
            """Decompresses f and closes it too."""

            def close(self):
                try:
                    super().close()
                finally:
                    f.close()

        return Owning(fileobj=f, mode="rb") if ext == ".gz" else Owning(f, mode="rb")
    try:
        if ext == ".deflate":
            import zlib

            data = zlib.decompress(f.read())
        elif ext == ".zst":
            try:
                from compression import zstd  # Python 3.14
            except ImportError:
                try:
                    import zstandard as zstd
                except ImportError:
                    raise FeedError(f"{split}: reading zstd-compressed CSV in direct mode needs Python 3.14 or the "
                                    "zstandard package (or use --feed arrow or --feed tensor)") from None
            data = zstd.ZstdDecompressor().decompress(f.read()) if hasattr(zstd, "ZstdDecompressor") else zstd.decompress(f.read())
        else:
            raise FeedError(f"{split}: compressed with {_UNREADABLE_CODECS[ext]} ({ext}), which Spindle does not read; "
                            "decompress it or recompress it with gzip, bzip2 or zstd")
    except FeedError:
        raise
    except Exception as e:  # zlib.error, zstd errors
        raise FeedError(f"{split}: decompress: {e}") from None
    f.close()
    return io.BytesIO(data)


class _RawNative(io.RawIOBase):
    """A raw Python file over a pyarrow NativeFile, which lacks readline.

    Only read, seek, tell and close of the NativeFile are used.
    """

    def __init__(self, f):
        super().__init__()
        self._f = f

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, b):
        data = self._f.read(len(b))
        n = len(data)
        memoryview(b).cast("B")[:n] = data
        return n

    def seek(self, pos, whence=0):
        return self._f.seek(pos, whence)

    def tell(self):
        return self._f.tell()

    def close(self):
        if not self.closed:
            self._f.close()
        super().close()


def _convert_csv(values):
    """Turn a list of CSV fields into a typed column: int64, float64 or str, as the executor infers them."""
    arr = np.array(values, dtype=object)
    stripped = [v.strip() for v in values]
    empty = np.array([v == "" for v in stripped], dtype=bool)
    filled = np.array([v if v else "0" for v in stripped])
    try:
        ints = filled.astype(np.int64)
        return np.ma.MaskedArray(ints, mask=empty) if empty.any() else ints
    except (ValueError, OverflowError):
        pass
    try:
        floats = filled.astype(np.float64)
        floats[empty] = np.nan
        return floats
    except (ValueError, OverflowError):
        pass
    return arr


class _SplitReader:
    """Reads the splits of one epoch as dicts of columns."""

    def __init__(self, spec, files):
        self.spec = spec
        self.files = files

    def names(self, split):
        """Return the column names of split's file."""
        with self.files.open(split) as f:
            if split.format == "csv":
                return self._csv_header(f, split)
            if split.format == "arrow":
                if self.files.use_pyarrow:
                    import pyarrow.ipc

                    return pyarrow.ipc.open_file(f).schema.names
                return _arrow.FileReader(f, split.uri).schema.names
            self._need_pyarrow(split)
            import pyarrow.parquet

            return pyarrow.parquet.ParquetFile(f).schema_arrow.names

    def _need_pyarrow(self, split):
        if not self.files.use_pyarrow:
            raise FeedError(f"{split}: reading Parquet in direct mode needs pyarrow, which is not installed "
                            "(use --feed arrow or --feed tensor, or install pyarrow)")

    def read(self, split, wanted):
        """Yield the split's data as dicts of columns (all columns when wanted is None).

        A split owns `rows` rows after skipping `row_offset` rows of what its
        units hold, so ranks can share one large row group or batch.
        """
        parts = self._read_units(split, wanted)
        if split.row_offset == 0 and split.rows == 0:
            yield from parts
            return
        skip, left = split.row_offset, split.rows
        for part in parts:
            n = len(next(iter(part.values()))) if part else 0
            if skip >= n:
                skip -= n
                continue
            end = n if split.rows == 0 else min(n, skip + left)
            yield {k: a[skip:end] for k, a in part.items()}
            left -= end - skip
            skip = 0
            if split.rows and left <= 0:
                return

    def _read_units(self, split, wanted):
        if split.format == "parquet":
            self._need_pyarrow(split)
        with self.files.open(split) as f:
            if split.format == "csv":
                yield self._read_csv(f, split)
            elif split.format == "arrow":
                yield from self._read_arrow(f, split)
            else:
                yield from self._read_parquet(f, split, wanted)

    def _read_arrow(self, f, split):
        if self.files.use_pyarrow:
            import pyarrow.ipc

            rd = pyarrow.ipc.open_file(f)
            for i in split.batches or range(rd.num_record_batches):
                if not 0 <= i < rd.num_record_batches:
                    raise FeedError(f"{split}: record batch {i} does not exist (the file has {rd.num_record_batches})")
                yield from_pyarrow_batch(rd.get_batch(i))
            return
        rd = _arrow.FileReader(f, split.uri)
        for i in split.batches or range(rd.num_batches):
            yield rd.read_batch(i)

    def _read_parquet(self, f, split, wanted):
        import pyarrow.parquet

        pf = pyarrow.parquet.ParquetFile(f)
        groups = split.row_groups or list(range(pf.num_row_groups))
        for g in groups:
            if not 0 <= g < pf.num_row_groups:
                raise FeedError(f"{split}: row group {g} does not exist (the file has {pf.num_row_groups})")
        try:
            table = pf.read_row_groups(groups, columns=wanted)
        except Exception as e:  # pyarrow raises ArrowInvalid, KeyError and others
            raise FeedError(f"{split}: read row groups {groups}: {e}") from None
        for batch in table.to_batches():
            yield from_pyarrow_batch(batch)

    def _csv_header(self, f, split):
        line = f.readline()
        try:
            fields = next(csv.reader([line.decode("utf-8")], delimiter=self.spec.delimiter_for(split)))
        except (UnicodeDecodeError, StopIteration):
            raise FeedError(f"{split}: cannot read the CSV header line") from None
        if self.spec.csv_header:
            return [c.strip() for c in fields]
        return [f"_c{i}" for i in range(len(fields))]

    def _csv_lines(self, f, split):
        """Return the bytes of the records that start inside [offset, offset+length)."""
        start, end = split.offset, split.offset + split.length
        if split.length <= 0:
            f.seek(0, 2)
            end = f.tell()
        if start > 0:
            # A line starts at start only when the byte before it ends a line.
            f.seek(start - 1)
            f.readline()
        else:
            f.seek(0)
            if self.spec.csv_header:
                f.readline()
        chunks = []
        while f.tell() < end:
            record = f.readline()
            if not record:
                break
            # A quoted field may hold line breaks: a record ends at a line
            # break outside quotes, where the quotes seen so far pair up.
            quotes = record.count(b'"')
            while quotes % 2:
                more = f.readline()
                if not more:
                    break
                record += more
                quotes += more.count(b'"')
            chunks.append(record)
        return b"".join(chunks)

    def _read_csv(self, f, split):
        names = self._csv_header(f, split)
        body = self._csv_lines(f, split)
        if self.files.use_pyarrow and body:
            import pyarrow.csv

            opts = pyarrow.csv.ParseOptions(delimiter=self.spec.delimiter_for(split))
            read = pyarrow.csv.ReadOptions(column_names=names)
            try:
                table = pyarrow.csv.read_csv(io.BytesIO(body), read_options=read, parse_options=opts)
            except Exception as e:  # pyarrow.lib.ArrowInvalid
                raise FeedError(f"{split}: parse CSV: {e}") from None
            return {n: from_pyarrow_array(table.column(n), n) for n in names}
        try:
            rows = [r for r in csv.reader(io.StringIO(body.decode("utf-8")), delimiter=self.spec.delimiter_for(split)) if r]
        except (UnicodeDecodeError, csv.Error) as e:
            raise FeedError(f"{split}: parse CSV: {e}") from None
        for k, r in enumerate(rows):
            if len(r) != len(names):
                raise FeedError(f"{split}: CSV record {k} of the split has {len(r)} fields; "
                                f"the header names {len(names)}")
        if not rows:
            return {n: np.empty(0, dtype=np.float64) for n in names}
        return {n: _convert_csv([r[j] for r in rows]) for j, n in enumerate(names)}


def select(columns, wanted, label, where):
    """Return the wanted columns (all when wanted is None) with label last."""
    names = list(columns) if wanted is None else list(wanted)
    if label is not None:
        names = [n for n in names if n != label] + [label]
    missing = [n for n in names if n not in columns]
    if missing:
        raise FeedError(f"{where}: no column {missing[0]!r} (the file has {', '.join(columns)})")
    return {n: columns[n] for n in names}


# The random streams of an epoch, as in Go's feed package.
_STREAM_SPLITS = 1
_STREAM_ROWS = 2
_MASK = (1 << 64) - 1


def _splitmix(x):
    """SplitMix64's finaliser on one Python int (Go's feed.splitmix)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _splitmix_array(x):
    """SplitMix64's finaliser on a uint64 array (wrapping as Go does)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def epoch_key(seed, epoch, rank, stream):
    """Return the key of one random stream of one epoch of one rank (Go's feed.epochKey)."""
    mixed = ((epoch << 32) ^ (rank & 0xFFFFFFFF) ^ (stream << 60) ^ 0x5350494E444C45) & _MASK
    return _splitmix(_splitmix(seed & _MASK) ^ _splitmix(mixed))


def window_key(rows_key, w):
    """Return the key of window w of an epoch's row stream (Go's feed.windowKey)."""
    return _splitmix((rows_key + w) & _MASK)


def permutation(key, n):
    """Return the permutation of range(n) that key gives: indices by splitmix(key ^ i), ascending."""
    with np.errstate(over="ignore"):
        keys = _splitmix_array(np.arange(n, dtype=np.uint64) ^ np.uint64(key))
    return np.argsort(keys, kind="stable")


class DirectEpoch:
    """One epoch of a direct-mode feed: this rank's splits, cut into batches."""

    def __init__(self, spec, epoch, use_pyarrow):
        self.spec = spec
        self.epoch = epoch
        self.reader = _SplitReader(spec, _Files(use_pyarrow))
        self.label = spec.label_column
        self._names = None
        self._gen = None

    @property
    def columns(self):
        """Return the column names of every batch, label last."""
        if self._names is None:
            if self.spec.columns:
                wanted = list(self.spec.columns)
            elif self.spec.splits:
                wanted = self.reader.names(self.spec.splits[0])
            else:
                wanted = []
            if self.label is not None:
                wanted = [n for n in wanted if n != self.label] + [self.label]
            self._names = wanted
        return self._names

    def _wanted(self):
        if not self.spec.columns:
            return None
        return list(self.spec.columns) + ([self.label] if self.label and self.label not in self.spec.columns else [])

    def _split_chunks(self, order):
        """Yield the column chunks of the splits in order."""
        wanted = self._wanted()
        for i in order:
            split = self.spec.splits[i]
            for c in self.reader.read(split, wanted):
                yield select(c, wanted, self.label, str(split))

    def _epoch_rows(self):
        """Yield this epoch's rows, in chunks, by the epoch rules (Go's feed/epoch.go).

        1. The splits in their order or, shuffling, in the epoch's permutation.
        2. With a row limit (even batches), the splits over again in the same
           order until the limit, cut there.
        3. Shuffling with a window W > 1, windows of exactly W rows (the last
           may be shorter), window w in the order of its own permutation.
        """
        spec = self.spec
        order = list(range(len(spec.splits)))
        if spec.shuffle:
            order = permutation(epoch_key(spec.seed, self.epoch, spec.rank, _STREAM_SPLITS), len(order)).tolist()
        limit = spec.epoch_row_limit
        if limit <= 0:
            rows = self._split_chunks(order)
        else:
            rows = _take(self._cycle(order, limit), limit)
        if not spec.shuffle or spec.shuffle_buffer_rows <= 1:
            yield from rows
            return
        key = epoch_key(spec.seed, self.epoch, spec.rank, _STREAM_ROWS)
        for w, window in enumerate(_rebatch(rows, spec.shuffle_buffer_rows)):
            perm = permutation(window_key(key, w), _rows(window))
            yield {n: a[perm] for n, a in window.items()}

    def _cycle(self, order, limit):
        """Yield the splits' chunks over and over, for padding up to limit rows."""
        while True:
            rows = 0
            for c in self._split_chunks(order):
                rows += _rows(c)
                yield c
            if rows == 0:
                raise FeedError(f"direct feed spec {self.spec.path}: rank {self.spec.rank} has no rows to fill "
                                f"its {limit} rows per epoch with")

    def _batches(self):
        return _rebatch(self._epoch_rows(), self.spec.batch_rows)

    def next_columns(self):
        """Return the next batch as a dict of columns, or None at the end of the epoch."""
        if self._gen is None:
            self._gen = self._batches()
        return next(self._gen, None)

    def close(self):
        if self._gen is not None:
            self._gen.close()


def _rows(cols):
    return len(next(iter(cols.values()))) if cols else 0


def _take(chunks, rows):
    """Yield chunks up to rows rows in all, cutting the last one."""
    if rows <= 0:
        return
    for chunk in chunks:
        n = _rows(chunk)
        if n >= rows:
            yield {k: a[:rows] for k, a in chunk.items()} if n > rows else chunk
            return
        rows -= n
        yield chunk


def _rebatch(chunks, size):
    """Cut a stream of column chunks into batches of size rows; the last may be short."""
    pending, have = [], 0
    for chunk in chunks:
        n = _rows(chunk)
        start = 0
        while n - start > 0:
            take = min(size - have, n - start)
            pending.append({k: a[start:start + take] for k, a in chunk.items()})
            have += take
            start += take
            if have == size:
                yield _join(pending)
                pending, have = [], 0
    if have:
        yield _join(pending)


def _join(parts):
    if len(parts) == 1:
        return parts[0]
    return {n: concat([p[n] for p in parts]) for n in parts[0]}

