"""The lab notes of a kernel family, read from the Markdown file beside its code.

A version record (kernels/attention/versions.py, kernels/attention/gluon_versions.py) keeps its
settings in the code and its words (change, prediction, the date the prediction was written,
outcome) in a notes file of its package, kernels/attention/notes.md: ``## name``, a
``Predicted at:`` line, then one paragraph under each of ``### Change``, ``### Prediction`` and
``### Outcome``. Read-only package data, so the words travel with the code into the iterations
phase's JSON.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

_FIELDS = {"Change": "change", "Prediction": "prediction", "Outcome": "outcome"}


def parse_notes(text: str) -> dict[str, dict[str, str]]:
    """name -> {"predicted_at", "change", "prediction", "outcome"}; a paragraph's lines joined by spaces."""
    notes: dict[str, dict[str, list[str]]] = {}
    record = key = None
    for line in text.splitlines():
        if line.startswith("# "):
            record = key = None
        elif line.startswith("## "):
            name = line[3:].strip()
            if name in notes:
                raise ValueError(f"notes: {name!r} recorded twice")
            record, key = notes.setdefault(name, {}), None
        elif record is not None and line.startswith("### "):
            key = _FIELDS[line[4:].strip()]
            record[key] = []
        elif record is not None and key is None and line.startswith("Predicted at: "):
            record["predicted_at"] = [line[len("Predicted at: "):].strip()]
        elif record is not None and key is not None and line.strip():
            record[key].append(line.strip())
    return {name: {"outcome": "", **{k: " ".join(v) for k, v in fields.items()}} for name, fields in notes.items()}


@lru_cache(maxsize=None)
def load_notes(package: str, filename: str = "notes.md") -> dict[str, dict[str, str]]:
    return parse_notes(resources.files(package).joinpath(filename).read_text(encoding="utf-8"))


def story(package: str, name: str, prefix: str = "") -> dict[str, str]:
    """The words of one record, as keyword arguments (change prefixed with `prefix`)."""
    try:
        words = dict(load_notes(package)[name])
    except KeyError:
        raise KeyError(f"{package} notes.md has no record {name!r}") from None
    words["change"] = prefix + words["change"]
    return words
