"""The one reader of data files, for both halves (standard library only): a file from someone else's
GPU is read as untrusted input, and refused with its name, the field and the value before anything
else looks at it.

In order: only a regular file is opened (a FIFO would block the build, /dev/zero would fill memory,
a symlink could point anywhere), and it is checked again once open; a size bound; a phase file kept
compressed (`bench.json.gz`, see `stored_path`) inflated to the same bound and no further; strict UTF-8;
a nesting bound, checked before the recursive parser runs; then the JSON, where a key given twice,
an integer of thousands of digits, NaN or infinity, and a string holding a character a reader cannot
see (collect/schema/chars.py) are each refused at their field.
"""
from __future__ import annotations

import gzip
import itertools
import json
import zlib
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from . import chars

# No phase file comes near this (the largest committed one is a few hundred KB, a run with ten times
# its rows a few MB); past it a file is refused before it is read, rather than building for minutes.
MAX_FILE_BYTES = 32 * 2**20
# The schema nests four deep (file, table, row, a row's mapping or records); the bound leaves room.
MAX_DEPTH = 16
# No count or size in the schema needs more digits than this (its bounds stop at 1e40).
MAX_INT_DIGITS = 48

_KINDS = ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class DataFileError(ValueError):
    """A data file refused: the message names the file, the field and the value."""


# A committed run's phase files may be kept gzip-compressed beside a plain manifest (python -m collect compact):
# indented JSON of numbers shrinks about eightfold, and every device call carries the whole tree in 64 MiB.
GZIP_SUFFIX = ".gz"
# Level 9 and no timestamp: the same JSON always compresses to the same bytes, so compacting or migrating a file
# twice changes nothing git can see.
GZIP_LEVEL = 9


def pack(raw: bytes) -> bytes:
    """A data file's bytes as the repository keeps them compressed (collect/compact.py, collect/schema/migrate.py)."""
    return gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0)


def stored_path(folder: str | os.PathLike, name: str) -> Path | None:
    """The file that holds data file `name` (e.g. bench.json) in `folder`: `name` itself or `name`.gz; None where
    neither exists. Both at once is ambiguous, and refused with the two names."""
    plain, packed = Path(folder) / name, Path(folder) / (name + GZIP_SUFFIX)
    here = [p for p in (plain, packed) if os.path.lexists(p)]
    if len(here) == 2:
        raise DataFileError(f"{plain}: also kept compressed as {packed.name}; a run holds one copy of each file. "
                            "Remove the one that is not current (python -m collect compact writes the .gz and "
                            "removes the plain file).")
    return here[0] if here else None


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular file is, in words; None for a regular file."""
    return next((words for test, words in _KINDS if test(mode)), None if stat.S_ISREG(mode) else "not a regular file")


def not_regular(path: Path, kind: str) -> DataFileError:
    return DataFileError(f"{path}: {kind}, not a regular file; runs are published, so only regular files are read "
                         "(it was not opened). Replace it with the data file itself, or remove it.")


def _read_bytes(path: Path) -> bytes:
    try:
        before = os.lstat(path)
        kind = kind_of(before.st_mode)
        if kind:
            raise not_regular(path, kind)
        if before.st_size > MAX_FILE_BYTES:
            raise _too_large(path, before.st_size)
        # O_NONBLOCK: were it swapped for a FIFO after the lstat, opening it must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            now = os.fstat(f.fileno())
            if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino) or kind_of(now.st_mode):
                raise DataFileError(f"{path}: it was replaced while it was being opened; it was not read. "
                                    "Build again once nothing is writing into data/.")
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read it ({exc.strerror}).") from None
    if len(raw) > MAX_FILE_BYTES:
        raise _too_large(path, len(raw))
    return raw


def inflate(path: Path, raw: bytes) -> bytes:
    """A gzip member's content, refused past MAX_FILE_BYTES inflated: a few KB of gzip can expand to gigabytes."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, MAX_FILE_BYTES + 1)
    except zlib.error as exc:
        raise DataFileError(f"{path}: not a valid gzip file ({exc}); it was not read. Restore it from git, or "
                            "compress the JSON again with python -m collect compact.") from None
    if len(out) > MAX_FILE_BYTES:
        raise _too_large(path, len(out))
    if not inflater.eof or inflater.unused_data:
        raise DataFileError(f"{path}: the gzip data is cut short or has bytes after its end; it was not read. "
                            "Restore it from git, or compress the JSON again with python -m collect compact.")
    return out


def _too_large(path: Path, size: int) -> DataFileError:
    return DataFileError(f"{path}: {size / 2**20:.1f} MiB is over the {MAX_FILE_BYTES // 2**20} MiB limit for one "
                         "data file (see the Data format page); it was not read. A run this large is not one a "
                         "page can narrate: collect fewer cases, or split the sweep into runs.")


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise DataFileError(f"{path}: not valid UTF-8 at byte {exc.start} (line {line}): {raw[exc.start:exc.end]!r}. "
                            "Data files are UTF-8 JSON; re-run the phase that wrote it, or restore it from git.") from None


def _check_depth(path: Path, text: str) -> None:
    """Refuse nesting past MAX_DEPTH without recursing: count the brackets outside strings."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets), default=0)
    if depth <= MAX_DEPTH:
        return
    level = 0
    for m in re.finditer(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', text):
        level += {"[": 1, "{": 1, "]": -1, "}": -1}.get(m.group(), 0)
        if level > MAX_DEPTH:
            line = text.count("\n", 0, m.start()) + 1
            raise DataFileError(f"{path}: nested deeper than {MAX_DEPTH} levels at line {line} ({depth} levels in "
                                "all); the schema nests a few levels, so this is not a data file. It was not parsed.")


class _Repeated(dict):
    """An object in which a key appeared more than once (found by the walk, which knows where it is)."""

    def __init__(self, pairs: list, key: str):
        super().__init__(pairs)
        self.key = key
        self.values = [v for k, v in pairs if k == key]


class _LongInt(str):
    """An integer written with more than MAX_INT_DIGITS digits, kept as text (converting it costs time
    quadratic in its length, and Python refuses past 4300 digits with an error that names no field)."""


def _pairs(pairs: list) -> dict:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set = set()
    return _Repeated(pairs, next(k for k, _ in pairs if k in seen or seen.add(k)))


def _int(text: str) -> int | _LongInt:
    return _LongInt(text) if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def shown(value: Any) -> str:
    shown = repr(value)  # repr writes every unprintable character as an escape: safe for a terminal
    return shown if len(shown) <= 120 else shown[:117] + "..."


def _problem(value: Any, loc: tuple) -> str | None:
    """The first thing in `value` the contract refuses, as 'field <path>: ...', walking in file order."""
    if isinstance(value, str):
        if isinstance(value, _LongInt):
            return (f"field {field_path(loc)}: a number of {len(value.lstrip('-'))} digits; no measurement has more than "
                    f"{MAX_INT_DIGITS}, and it was not converted.")
        i = chars.first_hidden(value)
        if i is not None:
            return (f"field {field_path(loc)}: value {shown(value)}: {chars.describe(value[i])} at character {i}. Names "
                    "and texts may not hold characters a reader cannot see (controls, zero-width and direction "
                    "marks); remove it.")
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return (f"field {field_path(loc)}: value {value}: NaN and infinity are not allowed; an unmeasured value is "
                    "null, with the row's status and reason saying why.")
        return None
    if isinstance(value, dict):
        if isinstance(value, _Repeated):
            return (f"field {field_path(loc)}: key {shown(value.key)} appears twice (values "
                    f"{', '.join(shown(v) for v in value.values)}); a parser keeps one in silence. Remove the other.")
        for key, item in value.items():
            problem = _problem(key, loc + (f"<key {shown(key)}>",)) or _problem(item, loc + (key,))
            if problem:
                return problem
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _problem(item, loc + (i,))
            if problem:
                return problem
    return None


def read_json(path: str | os.PathLike) -> Any:
    """The parsed JSON of one data file, or DataFileError naming the file, the field and the value."""
    return read_checked(path)[0]


def read_checked(path: str | os.PathLike) -> tuple[Any, str]:
    """(parsed JSON, its text) of one data file: the text for a validator that parses it again itself,
    so the file is opened once."""
    path = Path(path)
    raw = _read_bytes(path)
    text = _decode(path, inflate(path, raw) if path.name.endswith(GZIP_SUFFIX) else raw)
    _check_depth(path, text)
    try:
        data = json.loads(text, object_pairs_hook=_pairs, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}. "
                            "Re-run the phase that wrote it, or restore it from git.") from None
    problem = _problem(data, ())
    if problem:
        raise DataFileError(f"{path}: {problem}")
    return data, text
