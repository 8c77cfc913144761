"""A site built from hostile runs: every payload is shown as text, none becomes markup."""
import dataclasses
import html
import json
import re
import typing

from collect.schema import records
from hostile import corpus
from test_site_build import html_path


def test_the_corpus_attacks_every_free_text_field(hostile_site):
    c, _ = hostile_site
    fields = set(re.sub(r"\[\d+\]", "[]", w).split("/", 1)[1] for w in c.where.values())
    for f in ("manifest.json.device.name", "manifest.json.command", "manifest.json.hostname", "bench.json.notes[]",
              "bench.json.rows[].reason", "profile.json.kernels[].kernel_name", "manifest.json.phases[iterations].error",
              "manifest.json.phases[decode].error"):
        assert f in fields, f"the corpus no longer attacks {f}"


def test_every_string_the_corpus_spares_is_constrained_by_the_schema():
    """A field the corpus leaves alone must be one the schema holds to an identifier, a list of words or a time;
    otherwise it is free text, and free text is attacked."""
    loose = set()
    for cls in records():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            args = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
            if args[0] is str and f.name in corpus.KEEP and "pattern" not in f.metadata \
                    and "choices" not in f.metadata and not f.metadata.get("utc_time"):
                loose.add(f"{cls.__name__}.{f.name}")
    assert loose == {"DeviceFacts.name"}  # the one the corpus attacks anyway (corpus.ATTACK_ANYWAY)


def test_no_payload_becomes_markup_on_any_page(hostile_site):
    c, site = hostile_site
    found = []
    for page in sorted(site.rglob("*.html")):
        found += corpus.describe(c, str(page.relative_to(site)), corpus.leaks(page.read_text(encoding="utf-8")))
    assert found == [], "\n".join(found[:40]) + (f"\n... and {len(found) - 40} more" if len(found) > 40 else "")


def _visible_text(page_html: str) -> str:
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page_html, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_the_device_name_is_shown_as_typed(hostile_site):
    """Escaping keeps the characters: the reader sees the hostile name, not a broken page."""
    c, site = hostile_site
    n = next(n for n, w in c.where.items() if w == f"{c.narrated}/manifest.json.device.name")
    shown = " ".join(corpus.payload(n).split())[:120]
    for md in ("index.md", "reproduce.md", "byte-arithmetic.md"):
        assert shown in _visible_text(html_path(site, md).read_text(encoding="utf-8")), md


def test_only_validated_phase_files_are_published(hostile_site):
    c, site = hostile_site
    src = c.data_dir / "runs" / c.narrated
    published = sorted(p.name for p in (site / "data" / c.narrated).iterdir())
    assert published == sorted(p.name for p in src.glob("*.json"))
    for name in published:
        assert json.loads((site / "data" / c.narrated / name).read_text()) == json.loads((src / name).read_text())
