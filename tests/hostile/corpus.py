"""Hostile and impossible data for the report, built from a copy of a committed run.

Runs arrive from other people's GPUs, so the report must survive data written to attack it. This
module builds that data in a temp folder (never under data/):

- `hostile_data(dst)`: a data folder whose runs and references carry a payload in every free-text
  string (device name, hostname, command, notes, reasons, errors, kernel names, configs, ...).
  Each payload holds one attack per context a string can land in: HTML text and attributes,
  Markdown links, emphasis, code spans, headings and fences, math, attribute lists, `<script>`
  and Plotly text. Every payload is numbered, so a leak names the field it came from.
- `leaks(html)`: what of a payload got through into a built page (a tag, an event handler, a
  link, Markdown that was interpreted, an entity shown to readers instead of its character).
- `IMPOSSIBLE`: one run folder per impossible value (a negative latency, a count below zero, a
  percentage over 100, duplicate cases, a file from another run, invalid UTF-8, a symlink, an
  unknown file), each with the words the build must answer it with.
- `SECOND_ROUND`: the same for attacks on the reader and on values that contradict each other:
  invisible and reversing characters, a key given twice, nesting 10,000 deep, a 5,000-digit number, a
  1 MB name, a FIFO, a run from the future, inverted spreads, a latency no clock measures, a derived
  field that disagrees, another GPU's datasheet, a word outside its enumeration.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import shutil
import typing
from dataclasses import dataclass, field
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable

from collect.schema.datasheets import lookup

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"

# A string field the schema holds to an identifier, a word from a list or a time (its `doc` gives it a pattern,
# choices or utc_time) keeps its value: pages branch and join on these, and the build refuses anything else in
# them, so every page still has data to draw. Every other string gets a payload, so a free-text field added
# later is attacked without anyone listing it here; the schema, walked beside the data, says which is which.
# Kept although free text: a date the page prints as written (attacking it proves nothing new).
KEEP_FREE = {"predicted_at"}


def payload(n: int) -> str:
    """One string with an attack for every context; `hx<letter><n>` tags each part so a test can see
    which part was interpreted (a text run that starts with one means Markdown or HTML split it)."""
    return (f"HX{n} <img src=x onerror=alert({n})> <svg onload=alert({n})> \" onmouseover=\"alert({n})\" x='y "
            f"[hxL{n}](javascript:alert({n})) <javascript:alert({n})> **hxB{n}** _hxE{n}_ `hxC{n}` $hxM{n}$ "
            f"{{: onclick=\"alert({n})\" }} </script><script>alert({n})</script> <!-- hxK{n} "
            f"\n# hxH{n}\n```\nhxF{n}\n```\n\n<div markdown=\"1\">**hxD{n}**</div>")


@dataclass
class Corpus:
    """Where the hostile data lives and which field each numbered payload went into."""

    data_dir: Path
    narrated: str
    where: dict[int, str] = field(default_factory=dict)

    def field_of(self, n: int) -> str:
        return self.where.get(n, f"payload {n}")


def run_files(src: Path) -> list[tuple[str, Any]]:
    """(plain name, parsed JSON) of each data file of a run folder, plain or kept compressed (python -m collect
    compact): the copies the tests write are plain, as a collect writes them."""
    from collect.schema.reader import GZIP_SUFFIX, read_json

    files = sorted([*src.glob("*.json"), *src.glob("*.json" + GZIP_SUFFIX)], key=lambda f: f.name)
    return [(f.name.removesuffix(GZIP_SUFFIX), read_json(f)) for f in files]


def source_run(data_dir: Path = DATA) -> Path:
    """The newest committed run with the most phase files (the hostile copy must exercise every page, and the
    newest holds the newest fields). The newest by when it was made, not by its name: names sort by device first.
    The corpus spares fields by the schema, so a run with fields no older run has needs no list updated."""
    runs = [p for p in sorted((data_dir / "runs").iterdir()) if (p / "manifest.json").is_file()]
    if not runs:
        raise RuntimeError(f"no committed run under {data_dir / 'runs'} to build the hostile corpus from")

    def made(p: Path) -> str:
        return json.loads((p / "manifest.json").read_text(encoding="utf-8")).get("created_utc") or ""

    most = max(len(list(p.glob("*.json"))) + len(list(p.glob("*.json.gz"))) for p in runs)
    full = [p for p in runs if len(list(p.glob("*.json"))) + len(list(p.glob("*.json.gz"))) == most]
    return max(full, key=made)


def spared(f: dataclasses.Field) -> bool:
    """Whether the corpus leaves field `f`'s strings alone (see KEEP_FREE)."""
    m = f.metadata
    return "pattern" in m or "choices" in m or bool(m.get("utc_time")) or f.name in KEEP_FREE


def record_in(hint: Any) -> type | None:
    """The dataclass a field of type `hint` holds: itself, optional, in a list or as a mapping's values."""
    if dataclasses.is_dataclass(hint):
        return hint
    return next((r for a in typing.get_args(hint) if (r := record_in(a)) is not None), None)


def file_record(name: str) -> type | None:
    """The dataclass of a run folder's data file `name` (manifest.json, bench.json, ...)."""
    from collect.schema import PHASES

    return next((s.dataclass() for s in PHASES if s.filename == name), None)


def _attack(obj: Any, corpus: Corpus, where: str, cls: type | None, limit: int | None = None) -> Any:
    """`obj` with a payload appended to each string the schema (record `cls`, where known) leaves free. A string
    whose field bounds its length (`limit`) gives up its end to the payload, so the attacked run still builds and
    the payload, not the bound, is what the pages are tested on."""
    if isinstance(obj, dict):
        if cls is None:  # a free mapping (a config, a stall table): its keys stay, its strings are text
            return {k: _attack(v, corpus, f"{where}.{k}", None, limit) for k, v in obj.items()}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        return {k: v if k in fields and spared(fields[k]) else
                _attack(v, corpus, f"{where}.{k}", record_in(hints[k]) if k in fields else None,
                        fields[k].metadata.get("max_len") if k in fields else None)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_attack(v, corpus, f"{where}[{i}]", cls, limit) for i, v in enumerate(obj)]
    if isinstance(obj, str):
        n = len(corpus.where) + 1
        corpus.where[n] = where
        attack = payload(n)
        if limit is not None and len(obj) + 1 + len(attack) > limit:
            obj = obj[:max(0, limit - 1 - len(attack))]
        return f"{obj} {attack}" if obj else attack
    return obj


def spared_paths(obj: Any, cls: type, where: str = "") -> dict[str, str]:
    """{the first path of each spared field, by record and name: its value} in data `obj` of record `cls`: where
    a test puts a payload to see that the build refuses it there."""
    out: dict[str, str] = {}
    seen: set[tuple[type, str]] = set()

    def walk(o: Any, c: type | None, at: str) -> None:
        if isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, c, f"{at}[{i}]")
        elif isinstance(o, dict) and c is not None:
            fields = {f.name: f for f in dataclasses.fields(c)}
            hints = typing.get_type_hints(c)
            for k, v in o.items():
                if k not in fields:
                    continue
                if spared(fields[k]):
                    if (c, k) not in seen and isinstance(v, str):
                        seen.add((c, k))
                        out[f"{at}.{k}"] = v
                else:
                    walk(v, record_in(hints[k]), f"{at}.{k}")

    walk(obj, cls, where)
    return out


def attack_run(src: Path, dst: Path, corpus: Corpus, run_id: str, created_utc: str | None = None,
               device_name: str | None = None) -> Path:
    """Copy `src` as run `run_id` with a payload appended to every free-text string."""
    dst.mkdir(parents=True)
    for name, data in run_files(src):
        data["run_id"] = run_id
        if name == "manifest.json":
            if created_utc:
                data["created_utc"] = created_utc
            if device_name and data.get("device"):
                data["device"]["name"] = device_name
                sheet = lookup(device_name)  # the datasheet follows the name (the build refuses one that does not)
                data["datasheet"] = dataclasses.asdict(sheet) if sheet else None
        attacked = _attack(data, corpus, f"{run_id}/{name}", file_record(name))
        (dst / name).write_text(json.dumps(attacked, indent=1), encoding="utf-8")
    for f in sorted(src.glob("*.md")):
        shutil.copy(f, dst / f.name)
    return dst


def fail_phase(run_dir: Path, phase: str, error: str) -> None:
    """Record `phase` as failed with `error` and drop its file, as a crashed collect leaves it."""
    m = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    for rec in m["phases"]:
        if rec["name"] == phase:
            rec["status"], rec["error"] = "failed", error
    (run_dir / "manifest.json").write_text(json.dumps(m, indent=1), encoding="utf-8")
    for f in run_dir.glob(f"{phase}.json"):
        f.unlink()


def stop_phase(run_dir: Path, phase: str, error: str) -> None:
    """Record `phase` as stopped midway with `error`, its saved rows kept (a partial phase)."""
    m = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    for rec in m["phases"]:
        if rec["name"] == phase:
            rec["status"], rec["error"] = "partial", error
    (run_dir / "manifest.json").write_text(json.dumps(m, indent=1), encoding="utf-8")


def hostile_data(dst: Path, src: Path | None = None) -> Corpus:
    """A data folder of two attacked runs and the attacked references; the newest run is narrated, its
    iterations phase failed and its decode phase stopped midway, each with a payload for an error (the
    "not collected" note and the partial-data warning)."""
    src = src or source_run()
    corpus = Corpus(data_dir=dst, narrated="hostile-20261201")
    narrated = attack_run(src, dst / "runs" / corpus.narrated, corpus, corpus.narrated,
                          created_utc="2026-12-01T09:00:00+00:00")
    n = len(corpus.where) + 1
    corpus.where[n] = f"{corpus.narrated}/manifest.json.phases[iterations].error"
    fail_phase(narrated, "iterations", f"RuntimeError: {payload(n)}")
    n = len(corpus.where) + 1
    corpus.where[n] = f"{corpus.narrated}/manifest.json.phases[decode].error"
    stop_phase(narrated, "decode", f"KeyboardInterrupt: {payload(n)}")
    attack_run(src, dst / "runs" / "hostile-20261130", corpus, "hostile-20261130",
               created_utc="2026-11-30T09:00:00+00:00", device_name="NVIDIA A100-SXM4-80GB")
    for ref in sorted((DATA / "reference").iterdir()) if (DATA / "reference").is_dir() else []:
        if ref.is_dir():
            attack_run(ref, dst / "reference" / ref.name, corpus, ref.name)
    return corpus


# --- finding leaks in built HTML ----------------------------------------------------------------

_SUBMARK = re.compile(r"^hx[A-Z]\d+")
_MARK = re.compile(r"HX(\d+)|hx[A-Z](\d+)|alert\((\d+)\)")
_SHOWN_ENTITY = re.compile(r"&(lt|gt|amp|quot|apos|#\d+|#x[0-9a-fA-F]+);")
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def _num(text: str) -> int | None:
    m = _MARK.search(text)
    return int(next(g for g in m.groups() if g)) if m else None


class _Scanner(HTMLParser):
    """Walks a built page and notes every place a payload became markup instead of text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int | None, str]] = []
        self.stack: list[tuple[str, dict]] = []
        self.scripts: list[str] = []

    def _note(self, text: str, what: str) -> None:
        self.found.append((_num(text), what))

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k, v in attrs:
            if k.startswith("on"):
                self._note(f"{k}={v}", f"<{tag} {k}=...>: an event handler attribute")
            elif v and re.match(r"\s*javascript:", v, re.I):
                self._note(v, f"<{tag} {k}={v[:40]!r}>: a javascript: URL")
            elif v and k in ("href", "src", "action", "formaction") and _MARK.search(v):
                self._note(v, f"<{tag} {k}=...>: a payload chose where a link or resource points")
        if tag == "img" and a.get("src") == "x":
            self._note(str(attrs), "<img src=x>: a payload tag became an element")
        if tag == "svg" and "onload" in a:
            self._note(str(attrs), "<svg onload>")
        if tag not in _VOID:
            self.stack.append((tag, a))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in _VOID and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_comment(self, data):
        if _MARK.search(data):
            self._note(data, "an HTML comment opened by a payload hides the page after it")

    def handle_data(self, data):
        tag, attrs = self.stack[-1] if self.stack else ("", {})
        if tag == "script":
            if "alert(" in data and "Plotly.newPlot" not in data:
                self._note(data, "a <script> element made of a payload")
            self.scripts.append(data)
            return
        if tag == "style":
            return
        text = data.strip()
        if _SUBMARK.match(text):
            self._note(text, f"a text run starting with {text[:8]!r} inside <{tag}>: Markdown or HTML split a payload")
        if "arithmatex" in (attrs.get("class") or "") and _MARK.search(text):
            self._note(text, "payload rendered as math")
        i = data.find("HX")
        if i >= 0 and _SHOWN_ENTITY.search(data[i:]):
            self._note(data[i:], f"an entity shown as text after {data[i:i + 8]!r}: escaped twice")


def _plotly_calls(script: str) -> list[list[Any]]:
    """The JSON arguments of each Plotly.newPlot(...) call in a script."""
    dec, out = json.JSONDecoder(), []
    for m in re.finditer(r"Plotly\.newPlot\(\s*", script):
        pos, args = m.end(), []
        while pos < len(script) and script[pos] not in ")":
            obj, pos = dec.raw_decode(script, pos)
            args.append(obj)
            while pos < len(script) and script[pos] in " \t\n,":
                pos += 1
        out.append(args)
    return out


def _strings(obj: Any):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def plot_leaks(script: str) -> list[tuple[int | None, str]]:
    """Payload strings in Plotly's figure JSON that plotly.js would read as markup, or that show an
    entity (plotly.js decodes only &lt; &gt; &amp;, so &quot; there is shown as typed)."""
    found = []
    for args in _plotly_calls(script):
        for s in _strings(args):
            if not _MARK.search(s):
                continue
            # Pages may wrap an escaped string in their own <b> or <br>; the payload's own tags must stay text.
            if re.search(r"<\s*/?\s*(img|svg|script|div|a\b|javascript|!--)", s, flags=re.I):
                found.append((_num(s), f"plot text with a raw tag from a payload: {s[:60]!r}"))
            if re.search(r"&(quot|#39|#x27|apos|amp;(lt|gt|amp|quot));", s):
                found.append((_num(s), f"plot text escaped twice (readers see the entity): {s[:60]!r}"))
    return found


def leaks(html_text: str) -> list[tuple[int | None, str]]:
    """Every way a payload got through into this HTML page, as (payload number, what happened)."""
    sc = _Scanner()
    sc.feed(html_text)
    sc.close()
    return sc.found + [x for s in sc.scripts for x in plot_leaks(s)]


def describe(corpus: Corpus, page: str, found: list[tuple[int | None, str]]) -> list[str]:
    return [f"{page}: {what} (from {corpus.field_of(n) if n else 'unknown field'})" for n, what in found]


# --- impossible values --------------------------------------------------------------------------


def _rows_with(data: dict, table: str, key: str) -> int:
    """Index of the first row of `table` whose `key` is a number, else of its first ok row (a field newer
    than the committed run is still attacked); the corpus must not depend on row order."""
    rows = data.get(table, [])
    for i, r in enumerate(rows):
        if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool):
            return i
    for i, r in enumerate(rows):
        if r.get("status", "ok") == "ok":
            return i
    raise LookupError(f"{table} has no row to set {key} on")


def set_value(table: str, key: str, value: Any, filename: str) -> Callable[[Path], str]:
    """Mutation: set `key` of the first row that has it; returns the field path the build must name."""
    def mutate(run_dir: Path) -> str:
        path = run_dir / filename
        data = json.loads(path.read_text(encoding="utf-8"))
        i = _rows_with(data, table, key)
        data[table][i][key] = value
        path.write_text(json.dumps(data), encoding="utf-8")
        return f"{table}[{i}].{key}"
    return mutate


def duplicate_row(table: str, filename: str) -> Callable[[Path], str]:
    def mutate(run_dir: Path) -> str:
        path = run_dir / filename
        data = json.loads(path.read_text(encoding="utf-8"))
        data[table].append(copy.deepcopy(data[table][0]))
        path.write_text(json.dumps(data), encoding="utf-8")
        return f"{table}[{len(data[table]) - 1}]"
    return mutate


def other_run_id(filename: str) -> Callable[[Path], str]:
    def mutate(run_dir: Path) -> str:
        path = run_dir / filename
        data = json.loads(path.read_text(encoding="utf-8"))
        data["run_id"] = "a100-20260101"
        path.write_text(json.dumps(data), encoding="utf-8")
        return "run_id"
    return mutate


def invalid_utf8(filename: str) -> Callable[[Path], str]:
    def mutate(run_dir: Path) -> str:
        path = run_dir / filename
        raw = path.read_bytes()
        i = raw.index(b'"notes"') if b'"notes"' in raw else len(raw) // 2
        path.write_bytes(raw[:i] + b'"x\xff\xfe": 1, ' + raw[i:])
        return "UTF-8"
    return mutate


def symlink_out(name: str, target: str = "../../../.git/config") -> Callable[[Path], str]:
    def mutate(run_dir: Path) -> str:
        (run_dir / name).unlink(missing_ok=True)
        os.symlink(target, run_dir / name)
        return name
    return mutate


def stray_file(name: str, text: str = "{}") -> Callable[[Path], str]:
    def mutate(run_dir: Path) -> str:
        (run_dir / name).write_text(text, encoding="utf-8")
        return name
    return mutate


@dataclass
class Impossible:
    """A run folder the build must refuse, and what its message must name."""

    name: str
    file: str
    mutate: Callable[[Path], str]
    says: tuple[str, ...] = ()


IMPOSSIBLE = [
    Impossible("negative latency", "bench.json", set_value("rows", "latency_ms_median", -64.2, "bench.json"), ("-64.2",)),
    Impossible("absurd latency", "bench.json", set_value("rows", "latency_ms_median", 1e300, "bench.json"), ("1e+300",)),
    Impossible("zero latency", "bench.json", set_value("rows", "latency_ms_p10", 0.0, "bench.json"), ("0.0",)),
    Impossible("latency over an hour", "iterations.json",
               set_value("rows", "latency_ms_median", 3.7e6, "iterations.json"), ("3700000.0",)),
    Impossible("negative host time", "bench.json", set_value("rows", "host_us_median", -3.0, "bench.json"), ("-3.0",)),
    Impossible("negative decode step", "decode.json", set_value("rows", "step_ms_median", -1.0, "decode.json"), ("-1.0",)),
    Impossible("negative byte count", "profile.json",
               set_value("impls", "dram_read_bytes", -1.0, "profile.json"), ("-1.0",)),
    Impossible("negative peak memory", "bench.json", set_value("rows", "peak_mem_bytes", -4096, "bench.json"), ("-4096",)),
    Impossible("negative FLOP count", "bench.json", set_value("rows", "flops", -1.0, "bench.json"), ("-1.0",)),
    Impossible("percentage over 100", "profile.json",
               set_value("kernels", "l2_hit_rate_pct", 150.0, "profile.json"), ("150.0",)),
    Impossible("negative percentage", "profile.json",
               set_value("kernels", "achieved_occupancy_pct", -5.0, "profile.json"), ("-5.0",)),
    Impossible("agreement above 1", "decode.json", set_value("agreement", "agreement", 1.5, "decode.json"), ("1.5",)),
    Impossible("token match below 0", "decode.json", set_value("rows", "token_match", -0.1, "decode.json"), ("-0.1",)),
    Impossible("negative SM clock", "bench.json", set_value("rows", "sm_clock_mhz", -1500.0, "bench.json"), ("-1500.0",)),
    Impossible("negative ceiling", "manifest.json",
               set_value("measured_ceilings", "per_s_median", -4e12, "manifest.json"), ("-4000000000000.0",)),
    Impossible("negative device_over_ncu", "profile.json",
               set_value("clock_check", "device_over_ncu", -1.0, "profile.json"), ("-1.0",)),
    Impossible("duplicate bench case", "bench.json", duplicate_row("rows", "bench.json"), ("rows[0]", "duplicate")),
    Impossible("duplicate correctness case", "correctness.json", duplicate_row("rows", "correctness.json"),
               ("rows[0]", "duplicate")),
    Impossible("duplicate decode case", "decode.json", duplicate_row("rows", "decode.json"), ("rows[0]", "duplicate")),
    Impossible("duplicate profile launch", "profile.json", duplicate_row("kernels", "profile.json"),
               ("kernels[0]", "duplicate")),
    Impossible("phase file from another run", "bench.json", other_run_id("bench.json"), ("a100-20260101",)),
    Impossible("invalid UTF-8", "bench.json", invalid_utf8("bench.json"), ("UTF-8",)),
    Impossible("symlink out of the repository", "secret.json", symlink_out("secret.json"), ("symlink",)),
    Impossible("symlink in place of a phase file", "bench.json", symlink_out("bench.json", "../../../../etc/hostname"),
               ("symlink",)),
    Impossible("unknown file", "extra.json", stray_file("extra.json"), ("unknown",)),
    Impossible("unknown non-JSON file", "notes.txt", stray_file("notes.txt", "hello"), ("unknown",)),
    Impossible("created_utc without a time zone", "manifest.json",
               lambda d: _set_top(d, "manifest.json", "created_utc", "2026-11-29T08:00:00"), ("2026-11-29T08:00:00",)),
    Impossible("created_utc not a time", "manifest.json",
               lambda d: _set_top(d, "manifest.json", "created_utc", "yesterday"), ("yesterday",)),
    Impossible("implementation name that is not an identifier", "bench.json",
               lambda d: _set_row(d, "bench.json", "rows", "impl", "sdpa<img src=x onerror=alert(1)>"), ("impl",)),
    Impossible("status that is not a status", "decode.json",
               lambda d: _set_row(d, "decode.json", "rows", "status", "fine"), ("'fine'",)),
    Impossible("run id that is not a slug", "manifest.json", lambda d: _rename_run(d, "x](javascript:alert(1))"),
               ("run_id",)),
]

# --- second round: invisible characters, JSON that attacks the parser, values that contradict each other ---


def set_at(filename: str, path: tuple, value: Any) -> Callable[[Path], str]:
    """Mutation: set the value at `path` (keys and list indices) in one file; returns the field path."""
    def mutate(run_dir: Path) -> str:
        file = run_dir / filename
        data = json.loads(file.read_text(encoding="utf-8"))
        node = data
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
        file.write_text(json.dumps(data), encoding="utf-8")
        return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path))
    return mutate


def first_index(filename: str, table: str, where: Callable[[dict], bool]) -> int:
    """Index of the first row of `table` in the source run's `filename` that `where` accepts."""
    rows = json.loads((source_run() / filename).read_text(encoding="utf-8"))[table]
    return next(i for i, r in enumerate(rows) if where(r))


def duplicate_key(filename: str, table: str, key: str, first_value: Any) -> Callable[[Path], str]:
    """Row 0 of `table` gets `key` twice: `first_value` first, its own value last (the one a plain
    parser keeps, shadowing the first in silence)."""
    def mutate(run_dir: Path) -> str:
        file = run_dir / filename
        data = json.loads(file.read_text(encoding="utf-8"))
        row = json.dumps(data[table][0])
        text = json.dumps(data)
        assert text.count(row) == 1
        file.write_text(text.replace(row, "{" + f"{json.dumps(key)}: {json.dumps(first_value)}, " + row[1:]),
                        encoding="utf-8")
        return f"{table}[0]"
    return mutate


def nested(filename: str, depth: int) -> Callable[[Path], str]:
    """A note `depth` lists deep: a recursive parser runs out of stack long before the end."""
    def mutate(run_dir: Path) -> str:
        file = run_dir / filename
        text = file.read_text(encoding="utf-8")
        i = text.index('"notes": [') + len('"notes": [')
        file.write_text(text[:i] + "[" * depth + "]" * depth + ", " + text[i:], encoding="utf-8")
        return "deeper"
    return mutate


def long_number(filename: str, digits: int) -> Callable[[Path], str]:
    """An integer with more digits than Python converts from text by default (4300)."""
    def mutate(run_dir: Path) -> str:
        file = run_dir / filename
        data = json.loads(file.read_text(encoding="utf-8"))
        data["min_timed_runs"] = 0
        text = json.dumps(data).replace('"min_timed_runs": 0', '"min_timed_runs": ' + "9" * digits)
        file.write_text(text, encoding="utf-8")
        return "min_timed_runs"
    return mutate


def fifo(name: str) -> Callable[[Path], str]:
    """A named pipe in place of a phase file: reading it waits for a writer that never comes."""
    def mutate(run_dir: Path) -> str:
        (run_dir / name).unlink(missing_ok=True)
        os.mkfifo(run_dir / name)
        return name
    return mutate


def every_row(filename: str, table: str, change: Callable[[dict], None], first_field: str) -> Callable[[Path], str]:
    """Mutation: apply `change` to every ok row of `table`; returns the first such row's `first_field`."""
    def mutate(run_dir: Path) -> str:
        file = run_dir / filename
        data = json.loads(file.read_text(encoding="utf-8"))
        ok = [i for i, r in enumerate(data[table]) if r.get("status", "ok") == "ok"]
        for i in ok:
            change(data[table][i])
        file.write_text(json.dumps(data), encoding="utf-8")
        return f"{table}[{ok[0]}].{first_field}"
    return mutate


def _inverted_spread(row: dict) -> None:
    row["latency_ms_p10"], row["latency_ms_p90"] = 3 * row["latency_ms_median"], row["latency_ms_median"] / 3


def _tiny_latency(row: dict) -> None:
    row["latency_ms_median"] = 1e-300


def _clock_check_lies(run_dir: Path) -> str:
    """device_ms 10x ncu_ms, with the ratio and the gap derived from it still saying they agree."""
    file = run_dir / "profile.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    row = data["clock_check"][0]
    row["device_ms"], row["device_over_ncu"], row["gap_ms"] = 10 * row["ncu_ms"], 1.0, 0.0
    file.write_text(json.dumps(data), encoding="utf-8")
    return "clock_check[0].device_over_ncu"


def _datasheet_of_another_gpu(run_dir: Path) -> str:
    """An H200's datasheet, inflated, on a device that calls itself a T4."""
    file = run_dir / "manifest.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    data["device"]["name"] = "Tesla T4"
    data["datasheet"]["memory_bandwidth_bytes_per_s"] *= 1000
    data["datasheet"]["sm_count"] = 16
    file.write_text(json.dumps(data), encoding="utf-8")
    return "datasheet.key"


# Characters that change what a reader sees without being seen: reversing text, isolating it, hiding it,
# ending a C string, or driving a terminal. (code point as the message names it, where it is put)
INVISIBLE = [
    ("U+202E", "manifest.json", ("device", "name"), "NVIDIA \u202eH200"),
    ("U+2066", "profile.json", ("kernels", 0, "kernel_name"), "\u2066_attn_fwd"),
    ("U+200B", "manifest.json", ("device", "name"), "NVIDIA\u200b H200"),
    ("U+0000", "profile.json", ("kernels", 0, "kernel_name"), "_attn\u0000_fwd"),
    ("U+001B", "manifest.json", ("device", "name"), "NVIDIA \u001b[2J\u001b[31mH200"),
    ("U+001B", "manifest.json", ("phases", 0, "error"), "RuntimeError: \u001b]0;owned\u0007"),
]

SECOND_ROUND = [
    *(Impossible(f"{code} in {'.'.join(map(str, path))}", file,
                 set_at(file, path, text), (code,)) for code, file, path, text in INVISIBLE),
    Impossible("duplicate JSON key", "bench.json", duplicate_key("bench.json", "rows", "status", "error"),
               ("status", "twice")),
    Impossible("JSON nested 10,000 deep", "bench.json", nested("bench.json", 10_000), ("nested",)),
    Impossible("a number of 5,000 digits", "bench.json", long_number("bench.json", 5000), ("digits",)),
    Impossible("1 MB device name", "manifest.json", set_at("manifest.json", ("device", "name"), "A" * 2**20),
               ("1048576 characters",)),
    Impossible("FIFO as a phase file", "bench.json", fifo("bench.json"), ("FIFO",)),
    Impossible("created_utc in 2099", "manifest.json", set_at("manifest.json", ("created_utc",),
                                                                "2099-01-01T00:00:00+00:00"), ("2099", "future")),
    Impossible("p10 above the median and p90 below it", "bench.json",
               every_row("bench.json", "rows", _inverted_spread, "latency_ms_p10"), ("latency_ms_median",)),
    Impossible("a latency no clock can measure", "bench.json",
               every_row("bench.json", "rows", _tiny_latency, "latency_ms_median"), ("1e-300",)),
    Impossible("clock check whose derived fields disagree", "profile.json", _clock_check_lies, ("device_ms", "10")),
    Impossible("datasheet of another GPU", "manifest.json", _datasheet_of_another_gpu, ("Tesla T4", "'t4'")),
    Impossible("kernel class that is not one", "decode.json",
               set_at("decode.json", ("kernel_classes", 0, "kernel_class"), "attention-hidden"),
               ("attention-hidden",)),
]

# Values that look large but physics allows: the build must accept them.
def _rescale(filename: str, table: str, key: str, change: Callable[[dict, dict], None]) -> Callable[[Path], str]:
    """Mutation: `change(row, file)` on the first row of `table` with a number in `key`, which changes the
    measured fields and every field derived from them together (derived fields must agree)."""
    def mutate(run_dir: Path) -> str:
        path = run_dir / filename
        data = json.loads(path.read_text(encoding="utf-8"))
        i = _rows_with(data, table, key)
        change(data[table][i], data)
        path.write_text(json.dumps(data), encoding="utf-8")
        return f"{table}[{i}].{key}"
    return mutate


def _scale_times(row: dict, prefix: str, k: float) -> None:
    for stat in ("median", "p10", "p90"):
        if row.get(f"{prefix}_{stat}") is not None:
            row[f"{prefix}_{stat}"] *= k


def _step_over_floor(row: dict, _: dict, ratio: float = 7.5) -> None:
    _scale_times(row, "step_ms", ratio * row["floor_ms"] / row["step_ms_median"])
    row["achieved_over_floor"] = ratio
    row["tokens_per_s"] = row["batch"] / row["step_ms_median"] * 1e3


def _micro_over_copy(row: dict, data: dict, fraction: float = 1.3) -> None:
    rate = fraction * data["floor_bandwidth_bytes_per_s"]
    _scale_times(row, "latency_ms", row["bytes_read"] / rate * 1e3 / row["latency_ms_median"])
    row["achieved_bytes_per_s"], row["bandwidth_fraction"] = row["bytes_read"] / row["latency_ms_median"] * 1e3, fraction


def _device_over_ncu(row: dict, _: dict, ratio: float = 1.8) -> None:
    row["device_ms"] = ratio * row["ncu_ms"]
    row["device_over_ncu"], row["gap_ms"] = row["device_ms"] / row["ncu_ms"], row["device_ms"] - row["ncu_ms"]


POSSIBLE = [
    ("decode step above its bandwidth floor", "decode.json",
     _rescale("decode.json", "rows", "achieved_over_floor", _step_over_floor)),
    ("decode kernel above the copy figure", "decode.json",
     _rescale("decode.json", "micro", "bandwidth_fraction", _micro_over_copy)),
    ("device time above ncu's", "profile.json", _rescale("profile.json", "clock_check", "device_over_ncu", _device_over_ncu)),
]


def _set_row(run_dir: Path, filename: str, table: str, key: str, value: Any) -> str:
    path = run_dir / filename
    data = json.loads(path.read_text(encoding="utf-8"))
    data[table][0][key] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"{table}[0].{key}"


def _set_top(run_dir: Path, filename: str, key: str, value: Any) -> str:
    path = run_dir / filename
    data = json.loads(path.read_text(encoding="utf-8"))
    data[key] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    return key


def _rename_run(run_dir: Path, run_id: str) -> str:
    """Give the run a hostile id, in its folder name and every file (so only the id's shape is wrong)."""
    for f in run_dir.glob("*.json"):
        _set_top(run_dir, f.name, "run_id", run_id)
    run_dir.rename(run_dir.parent / run_id)
    return "run_id"


def copy_run(dst_data: Path, run_id: str = "impossible-20261201", src: Path | None = None) -> Path:
    """A plain copy of the committed run under a new id (the base every impossible case mutates)."""
    src = src or source_run()
    dst = dst_data / "runs" / run_id
    dst.mkdir(parents=True)
    for name, data in run_files(src):
        data["run_id"] = run_id
        if name == "profile.json" and not data.get("clock_check"):
            data["clock_check"] = [_clock_check_row(data)]
        (dst / name).write_text(json.dumps(data), encoding="utf-8")
    return dst


def _clock_check_row(profile: dict) -> dict:
    """A plausible cross-check row from the first profiled call (runs collected before the cross-check
    existed have none, and the bounds on it must still be exercised)."""
    r = next(r for r in profile["impls"] if r.get("duration_ms"))
    return {"case_id": r["case_id"], "impl": r["impl"], "batch": r["batch"], "heads": r["heads"],
            "seq_len": r["seq_len"], "head_dim": r["head_dim"], "dtype": r["dtype"], "causal": r["causal"],
            "kernels": r["kernels"], "ncu_ms": r["duration_ms"], "device_ms": r["duration_ms"] * 1.02,
            "device_over_ncu": 1.02, "gap_ms": r["duration_ms"] * 0.02, "sm_clock_mhz": None}


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text)


def markdown_to_html(text: str) -> str:
    """Markdown to HTML with the extensions mkdocs.yml configures (what a page's Markdown goes through)."""
    import markdown
    import yaml

    cfg = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    exts, configs = [], {}
    for item in cfg.get("markdown_extensions", []):
        if isinstance(item, dict):
            (name, conf), = item.items()
            exts.append(name)
            configs[name] = {k: {"true": True, "false": False}.get(v, v) for k, v in (conf or {}).items()}
        else:
            exts.append(item)
    return markdown.markdown(text, extensions=exts, extension_configs=configs)
