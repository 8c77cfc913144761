"""The Data format page, generated from the schema dataclasses so the docs cannot drift from the code."""
from __future__ import annotations

import dataclasses
import html
import re
import typing

from collect.schema import SCHEMA_VERSION, STATUSES, available_specs
from collect.schema.common import PHASE_STATUSES
from collect.schema.migrate import LATEST
from collect.schema.registry import DERIVED
from collect.schema.reader import MAX_DEPTH, MAX_FILE_BYTES, MAX_INT_DIGITS

from ..validate import allowed
from .base import Page


def _type_name(tp, inner: bool = False) -> str:
    """A field's type in words. A list or object that may be null says so after a comma, and an item that may be
    null is bracketed: `list of number, or null` (the field may be null) is not `list of (number or null)`."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        return f"list of {_type_name(args[0], inner=True)}"
    if origin is dict:
        return f"object of {_type_name(args[1], inner=True)}"
    if args and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        words = " or ".join(_type_name(a, inner=True) for a in rest)
        if inner:
            return f"({words} or null)"
        return words + (", or null" if any(typing.get_origin(a) in (list, dict) for a in rest) else " or null")
    if dataclasses.is_dataclass(tp):
        return f"<a href='#{tp.__name__.lower()}'>{tp.__name__}</a>"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, getattr(tp, "__name__", str(tp)))


def _walk(cls, seen: list) -> None:
    if cls in seen:
        return
    seen.append(cls)
    for tp in typing.get_type_hints(cls).values():
        for t in (tp, *typing.get_args(tp), *[a for x in typing.get_args(tp) for a in typing.get_args(x)]):
            if dataclasses.is_dataclass(t):
                _walk(t, seen)


class DataFormatPage(Page):
    slug = "dataformat"
    phase = "env"

    def version(self) -> int:
        return SCHEMA_VERSION

    def max_file_size(self) -> str:
        return f"{MAX_FILE_BYTES // 2**20} MiB"

    def max_depth(self) -> int:
        return MAX_DEPTH

    def max_int_digits(self) -> int:
        return MAX_INT_DIGITS

    def migrate_step(self) -> str:
        """The migration that brings a file of any older schema version to this one."""
        return LATEST.__name__

    def statuses(self) -> str:
        return ", ".join(f"`{s}`" for s in STATUSES)

    def unmeasured_statuses(self) -> str:
        return ", ".join(f"`{s}`" for s in STATUSES if s != "ok")

    def phase_statuses(self) -> str:
        return ", ".join(f"`{s}`" for s in PHASE_STATUSES)

    def files(self) -> str:
        out = []
        for spec in available_specs():
            cls = spec.dataclass()
            out.append(f"## `{spec.filename}`: {spec.title}\n")
            classes: list = []
            _walk(cls, classes)
            for c in classes:
                out.append(self._table(c))
        return "\n".join(out)

    def derived(self) -> str:
        """The files computed from runs (a noise floor, a diff), documented like the phase files."""
        out = []
        for spec in DERIVED:
            out.append(f"### `{spec.path}`: {spec.title}\n")
            classes: list = []
            _walk(spec.schema, classes)
            out += [self._table(c) for c in classes]
        return "\n".join(out)

    @staticmethod
    def _doc_html(text: str) -> str:
        """A schema docstring (ours, not data) as HTML: escaped, with its `code` spans as <code>."""
        return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))

    def _table(self, cls) -> str:
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            rows.append(f"<tr><td><code>{f.name}</code></td><td>{_type_name(hints[f.name])}</td>"
                        f"<td>{'yes' if required else 'no'}</td><td>{self._doc_html(f.metadata.get('doc', ''))}"
                        f"{html.escape(f' Allowed: {allowed(f)}.') if allowed(f) else ''}</td></tr>")
        doc = self._doc_html((cls.__doc__ or "").strip().splitlines()[0]) if cls.__doc__ else ""
        if getattr(cls, "CASE_KEY", None):  # rows with the same values here measure one case twice: refused
            doc += f" One row per case: {html.escape(', '.join(cls.CASE_KEY))}."
        return (f'\n<h3 id="{cls.__name__.lower()}"><code>{cls.__name__}</code></h3>\n<p>{doc}</p>\n'
                f'<div class="report-table"><table><thead><tr><th>Field</th><th>Type</th><th>Required</th>'
                f"<th>Meaning</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>\n")
