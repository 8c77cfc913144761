"""Migrations of committed data files: one function per schema change, each taking and returning the
parsed JSON of one file (a dict), changing nothing else. Apply them with `python -m collect.schema.migrate
FUNCTION FILE...`; each is idempotent."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def rename_decode_hf_variant(doc: dict) -> dict:
    """decode.json: the transformers eager loop's variant 'hf' is now 'hf-eager' (beside 'hf-compiled')."""
    for row in doc.get("rows", []):
        if row.get("variant") == "hf":
            row["variant"] = "hf-eager"
    return doc


MIGRATIONS = {f.__name__: f for f in (rename_decode_hf_variant,)}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in MIGRATIONS:
        print(f"usage: python -m collect.schema.migrate {{{','.join(MIGRATIONS)}}} FILE...", file=sys.stderr)
        return 2
    fn = MIGRATIONS[argv[0]]
    for name in argv[1:]:
        path = Path(name)
        before = json.loads(path.read_text(encoding="utf-8"))
        after = fn(json.loads(path.read_text(encoding="utf-8")))
        if after != before:  # as collect/jsonio.py writes
            path.write_text(json.dumps(after, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
