"""Migrations of committed data files: one function per schema change, each taking and returning the
parsed JSON of one file (a dict), changing nothing else. Apply them with `python -m collect.schema.migrate
FUNCTION FILE...`; each is idempotent."""
from __future__ import annotations

import copy
import json
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

from .reader import GZIP_SUFFIX, inflate, pack


def rename_decode_hf_variant(doc: dict) -> dict:
    """decode.json: the transformers eager loop's variant 'hf' is now 'hf-eager' (beside 'hf-compiled')."""
    for row in doc.get("rows", []):
        if row.get("variant") == "hf":
            row["variant"] = "hf-eager"
    return doc


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


def to_version_2(doc: dict) -> dict:
    """Any phase file or manifest of schema version 1: the decode renames above, then version 2. Version 2
    adds only optional fields (host and loop time, SM clocks, the clock cross-check, ceiling sweeps, the
    kernel path, the decode step's breakdown and agreement) and bounds that version-1 data already met."""
    if doc.get("schema_version") != 1:
        return doc
    doc = decode_int8_comparison_series(rename_decode_hf_variant(doc))
    doc["schema_version"] = 2
    return doc


def to_version_3(doc: dict) -> dict:
    """Any file of schema version 2 (older ones through to_version_2 first): version 3 adds one optional
    field, decode rows' read_floor_ms, which older runs did not measure."""
    doc = to_version_2(doc)
    if doc.get("schema_version") == 2:
        doc["schema_version"] = 3
    return doc


def to_version_4(doc: dict) -> dict:
    """Any file of schema version 3 (older ones through the steps above): version 4 adds two optional
    fields, decode rows' attention_launch (older runs launched attention plainly) and attention_config
    (which older runs did not record)."""
    doc = to_version_3(doc)
    if doc.get("schema_version") == 3:
        doc["schema_version"] = 4
    return doc


def to_version_5(doc: dict) -> dict:
    """Any file of schema version 4 (older ones through the steps above): version 5 adds one optional
    field, decode rows' attention_trials (the times behind attention_launch and attention_config, which
    older runs did not record), and the launch suffix '+new-kv' older runs did not offer."""
    doc = to_version_4(doc)
    if doc.get("schema_version") == 4:
        doc["schema_version"] = 5
    return doc


def to_version_6(doc: dict) -> dict:
    """Any file of schema version 5 (older ones through the steps above): version 6 adds optional fields
    only, the samples behind each timing statistic (bench and iterations rows' latency_samples_ms, decode
    rows' step_samples_ms), which older runs did not keep: their rows stay comparable by median alone."""
    doc = to_version_5(doc)
    if doc.get("schema_version") == 5:
        doc["schema_version"] = 6
    return doc


def to_version_7(doc: dict) -> dict:
    """Any file of schema version 6 (older ones through the steps above): version 7 adds optional fields only,
    correctness rows' kernel_path, kernel_step and backend_used (what ran, which older runs did not record) and
    route_case (cases added to reach every kernel route, which older grids did not have: false)."""
    doc = to_version_6(doc)
    if doc.get("schema_version") == 6:
        doc["schema_version"] = 7
    return doc


def to_version_8(doc: dict) -> dict:
    """Any file of schema version 7 (older ones through the steps above): version 8 adds optional fields only, the
    pace (host_bound) of a noise floor's class records and of a diff's cases, and the diff's floor source 'paced';
    a noise file without it holds each class pooled over both paces, as before."""
    doc = to_version_7(doc)
    if doc.get("schema_version") == 7:
        doc["schema_version"] = 8
    return doc


def to_version_9(doc: dict) -> dict:
    """Any file of schema version 8 (older ones through the steps above): version 9 adds optional fields only, bench
    rows' power at the limit (board_power_w, power_limit_w, power_sm_clock_mhz, power_loop_ms, energy_mj_per_call),
    which older runs did not measure."""
    doc = to_version_8(doc)
    if doc.get("schema_version") == 8:
        doc["schema_version"] = 9
    return doc


def to_version_10(doc: dict) -> dict:
    """Any file of schema version 9 (older ones through the steps above): version 10 adds optional fields only, the
    persistent decode step's split of each role's span (kernel roles' handoff_ms_per_step and late_ms_per_step) and
    how often one SM finished its operations last (decode rows' last_sm_share), which older runs did not trace."""
    doc = to_version_9(doc)
    if doc.get("schema_version") == 9:
        doc["schema_version"] = 10
    return doc


# When the stamped spin (collect/spin_clock.py) came in: phases started from then on read the SM clock from its
# counters, earlier ones from CUDA events (its commit's time; no run was collected from a checkout without it since).
STAMPED_SPIN_SINCE = "2026-12-06T04:50:41+00:00"
# The phases whose timed calls read the clock in the spin before each (collect/timing.device_time).
CLOCKED_PHASES = ("env", "bench", "iterations", "decode", "profile")


def to_version_11(doc: dict) -> dict:
    """Any file of schema version 10 (older ones through the steps above): version 11 records, per phase of a
    manifest, how its timed calls read the SM clock (sm_clock_method). Older runs did not record it; a phase that
    times calls and left rows gets it from when it started (counters from the stamped spin's commit on, events
    before), the rest none."""
    doc = to_version_10(doc)
    if doc.get("schema_version") != 10:
        return doc
    doc["schema_version"] = 11
    if isinstance(doc.get("phases"), list) and "run_id" in doc and doc.get("origin", "measured") == "measured":
        since = datetime.fromisoformat(STAMPED_SPIN_SINCE)
        for rec in (r for r in doc["phases"] if isinstance(r, dict)):
            started = rec.get("started_utc") or doc.get("created_utc")
            if (rec.get("name") in CLOCKED_PHASES and isinstance(started, str)
                    and rec.get("status") in ("complete", "partial") and "sm_clock_method" not in rec):
                rec["sm_clock_method"] = "counters" if datetime.fromisoformat(started) >= since else "events"
    return doc


# The step that brings any older file to the current version.
LATEST = to_version_11

MIGRATIONS = {f.__name__: f for f in (rename_decode_hf_variant, decode_int8_comparison_series, to_version_2,
                                      to_version_3, to_version_4, to_version_5, to_version_6, to_version_7,
                                      to_version_8, to_version_9, to_version_10, to_version_11)}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in MIGRATIONS:
        print(f"usage: python -m collect.schema.migrate {{{','.join(MIGRATIONS)}}} FILE...", file=sys.stderr)
        return 2
    fn = MIGRATIONS[argv[0]]
    for name in argv[1:]:
        path = Path(name)
        packed = path.name.endswith(GZIP_SUFFIX)  # a compacted run's phase file (collect/compact.py)
        raw = path.read_bytes()
        text = (inflate(path, raw) if packed else raw).decode("utf-8")
        before = json.loads(text)
        after = fn(copy.deepcopy(before))  # a migration may change its argument in place
        if after != before:  # as collect/jsonio.py writes; a file written with raw UTF-8 keeps it
            out = (json.dumps(after, indent=1, ensure_ascii=text.isascii(), allow_nan=False) + "\n").encode("utf-8")
            path.write_bytes(pack(out) if packed else out)  # compressed as collect/compact.py compresses
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
