"""Migrations of committed data files, one function per schema change (standard library only).

Each function takes the parsed JSON of one file and returns it migrated; it leaves a file it does not
apply to unchanged, so running it twice, or on every file of a run, is safe:

    python -m collect.schema.migrate decode_int8_comparison_series data/reference/t4-published/decode.json
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def decode_int8_comparison_series(data: dict) -> dict:
    """decode.json: rows of one case key measured twice get `series` to tell them apart.

    The published T4 study measured its int8-cache comparison (a bf16 baseline beside the int8
    cache) as a separate experiment, at a shape its context sweep also has: two `eager` rows with
    one (model, variant, batch, context). The comparison's rows are the ones that report the cache
    size and no step time; they become series 'int8-comparison', the sweep's rows stay ''.
    """
    rows = data.get("rows")
    if not isinstance(rows, list) or not rows or "variant" not in rows[0]:
        return data
    key = lambda r: (r.get("model"), r.get("variant"), r.get("batch"), r.get("context"))  # noqa: E731
    repeated = {k for k, n in Counter(key(r) for r in rows).items() if n > 1}
    comparison = [r for r in rows if r.get("kv_cache_bytes") is not None and r.get("step_ms_median") is None]
    if not any(key(r) in repeated for r in comparison):
        return data
    for r in rows:
        r.setdefault("series", "")
    for r in comparison:
        r["series"] = "int8-comparison"
    return data


MIGRATIONS = {f.__name__: f for f in (decode_int8_comparison_series,)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m collect.schema.migrate",
                                 description="Apply one schema migration to data files in place.")
    ap.add_argument("migration", choices=sorted(MIGRATIONS), help="the migration to apply")
    ap.add_argument("files", nargs="+", type=Path, help="JSON data files to migrate (others are left as they are)")
    args = ap.parse_args(argv)
    for path in args.files:
        before = json.loads(path.read_text(encoding="utf-8"))
        after = MIGRATIONS[args.migration](json.loads(json.dumps(before)))
        if after != before:
            path.write_text(json.dumps(after, indent=1) + "\n", encoding="utf-8")
            print(f"{path}: migrated", file=sys.stderr)
        else:
            print(f"{path}: unchanged", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
