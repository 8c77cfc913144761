"""A site built from hostile runs: every payload is shown as text, none becomes markup."""
import copy
import html
import json
import re

import pytest

from hostile import corpus
from test_site_build import html_path


def test_the_corpus_attacks_every_free_text_field(hostile_site):
    c, _ = hostile_site
    fields = set(re.sub(r"\[\d+\]", "[]", w).split("/", 1)[1] for w in c.where.values())
    for f in ("manifest.json.device.name", "manifest.json.command", "manifest.json.hostname", "bench.json.notes[]",
              "bench.json.rows[].reason", "profile.json.kernels[].kernel_name", "manifest.json.phases[iterations].error",
              "manifest.json.phases[decode].error"):
        assert f in fields, f"the corpus no longer attacks {f}"


def _set(data, path: str, value) -> None:
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path) for p in p if p]
    for p in parts[:-1]:
        data = data[p]
    data[parts[-1]] = value


def test_every_string_the_corpus_spares_is_one_the_build_refuses_a_payload_in(tmp_path):
    """The corpus leaves a string alone only where the schema holds it to an identifier, a word or a time: there a
    payload is refused by the build, field by field, so sparing it hides no leak. Free text is attacked."""
    from render.errors import DataError
    from render.validate import load_checked

    src = corpus.source_run()
    spared = 0
    for name, data in corpus.run_files(src):
        cls = corpus.file_record(name)
        for path, value in corpus.spared_paths(data, cls).items():
            if path.rsplit(".", 1)[-1] in corpus.KEEP_FREE:
                continue
            bad = copy.deepcopy(data)
            _set(bad, path, f"{value} {corpus.payload(1)}")
            f = tmp_path / name
            f.write_text(json.dumps(bad), encoding="utf-8")
            with pytest.raises(DataError):
                load_checked(f, cls)
            spared += 1
    assert spared >= 20  # identifiers, statuses, dtypes, times: the pages' joins


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
