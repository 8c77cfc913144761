"""The Data format page says it cannot drift from the code: a field's description names every value its
rule allows (a status word or a dtype), so a reader is never told of fewer than the data may hold."""
from __future__ import annotations

import dataclasses
import typing

import pytest

from collect.schema import FILE_SPECS
from collect.schema.common import DTYPES, ROW_STATUS, STATUSES


def _records(cls, seen=None):
    """Every dataclass reachable from a phase file's schema, through list, optional and mapping fields."""
    seen = set() if seen is None else seen
    if cls in seen or not dataclasses.is_dataclass(cls):
        return seen
    seen.add(cls)
    for hint in typing.get_type_hints(cls).values():
        for arg in (hint, *typing.get_args(hint), *[a for t in typing.get_args(hint) for a in typing.get_args(t)]):
            if dataclasses.is_dataclass(arg):
                _records(arg, seen)
    return seen


FIELDS = [(cls.__name__, f) for spec in FILE_SPECS.values() for cls in sorted(_records(spec.dataclass()), key=str)
          for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("where,field", [(c, f) for c, f in FIELDS if f.metadata.get("pattern") == ROW_STATUS],
                         ids=lambda x: x if isinstance(x, str) else x.name)
def test_a_status_fields_description_names_every_status_it_allows(where, field):
    missing = [s for s in STATUSES if s not in field.metadata["doc"]]
    assert not missing, f"{where}.{field.name}: its description leaves out {missing}"


@pytest.mark.parametrize("where,field", [(c, f) for c, f in FIELDS if f.metadata.get("choices") == DTYPES
                                         and " or '" in f.metadata["doc"]],
                         ids=lambda x: x if isinstance(x, str) else x.name)
def test_a_dtype_field_that_lists_dtypes_lists_every_one_it_allows(where, field):
    missing = [d for d in DTYPES if f"'{d}'" not in field.metadata["doc"]]
    assert not missing, f"{where}.{field.name}: its description leaves out {missing}"


# ---- what the page says of a file agrees with what the reader and the validator do -------------------------------

def _rendered(tmp_path) -> str:
    import html
    from pathlib import Path

    import synthetic
    from render.site import Report

    synthetic.make_run(tmp_path)
    page = Path(__file__).resolve().parent.parent / "docs" / "data-format.md"
    return " ".join(html.unescape(Report.load(tmp_path).render_markdown(page.read_text(), "data-format.md")).split())


def test_the_type_words_tell_a_field_that_may_be_null_from_items_that_may_be(tmp_path):
    """`software` is an object whose values may be null; `latency_samples_ms` a list that may itself be null. The
    page words them apart, and the validator accepts and refuses as the words say."""
    import json
    import re

    import synthetic
    from render.errors import DataError
    from render.pages.dataformat import _type_name
    from render.validate import load_validated
    from collect.schema.manifest import Manifest

    assert _type_name(dict[str, str | None]) == "object of (string or null)"
    assert _type_name(dict[str, float] | None) == "object of number, or null"
    assert _type_name(list[float] | None) == "list of number, or null"
    assert _type_name(float | None) == "number or null"
    text = _rendered(tmp_path / "site")
    assert "<td><code>software</code></td><td>object of (string or null)</td>" in text
    assert re.search(r"<td><code>latency_samples_ms</code></td><td>list of number, or null</td>", text)
    assert "object of string or null" not in text and "list of number or null" not in text

    run = synthetic.make_run(tmp_path / "data")
    m = json.loads((run / "manifest.json").read_text())
    assert m["software"]["ncu"] is None  # an item that is null: accepted
    assert load_validated(run / "manifest.json", Manifest).software["ncu"] is None
    m["software"] = None  # the object itself null: refused
    (run / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(DataError, match="software"):
        load_validated(run / "manifest.json", Manifest)


def test_the_limits_the_page_states_are_the_readers(tmp_path):
    """Nesting depth, integer digits, invisible characters and the migration step: each stated number or name is the
    one the code uses, and a file past it is refused."""
    import re

    from collect.schema import SCHEMA_VERSION
    from collect.schema.migrate import LATEST, MIGRATIONS
    from collect.schema.reader import DataFileError, read_json

    text = _rendered(tmp_path / "site")
    depth = int(re.search(r"nesting deeper than (\d+) levels", text).group(1))
    digits = int(re.search(r"an integer of more than (\d+) digits", text).group(1))
    step = re.search(r"python -m collect\.schema\.migrate (\w+) data/runs/<run-id>/\*\.json\*", text).group(1)
    assert step in MIGRATIONS and MIGRATIONS[step] is LATEST and step.endswith(str(SCHEMA_VERSION))
    assert f"this code reads version {SCHEMA_VERSION}" in text

    f = tmp_path / "x.json"
    for body, ok in (("[" * depth + "]" * depth, True), ("[" * (depth + 1) + "]" * (depth + 1), False),
                     ('{"n": ' + "9" * digits + "}", True), ('{"n": ' + "9" * (digits + 1) + "}", False),
                     ('{"a": 1, "a": 2}', False), ('{"s": "a\\u200bb"}', False), ('{"s": "a\\tb\\nc"}', True),
                     ('{"x": NaN}', False)):
        f.write_text(body)
        if ok:
            read_json(f)
        else:
            with pytest.raises(DataFileError):
                read_json(f)
    f.write_bytes(b'{"s": "\xff"}')
    with pytest.raises(DataFileError, match="UTF-8"):
        read_json(f)


def test_the_statuses_the_page_lists_are_the_schemas(tmp_path):
    from collect.schema.common import PHASE_STATUSES

    text = _rendered(tmp_path / "site")
    assert "Each row has a `status` (" + ", ".join(f"`{s}`" for s in STATUSES) + ")" in text
    assert "keeps its place with one of " + ", ".join(f"`{s}`" for s in STATUSES if s != "ok") in text
    assert "has a status (" + ", ".join(f"`{s}`" for s in PHASE_STATUSES) + ")" in text
