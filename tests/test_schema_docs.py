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
