"""Which characters a string in a data file may hold: none that changes what a reader sees without
being seen. Controls (NUL, ESC, which drives a terminal), format characters (zero-width spaces, the
marks and overrides that reverse or isolate text), lone surrogates and line or paragraph separators
are refused in every string; tab, line feed and carriage return are kept (tracebacks and notes).
render/ refuses such a string; collect/ writes the character as visible text instead (`visible`)."""
from __future__ import annotations

import unicodedata

_KEPT_CONTROLS = frozenset("\t\n\r")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_CATEGORY_WORDS = {"Cc": "a control character", "Cf": "an invisible format character", "Cs": "a lone surrogate",
                   "Zl": "a line separator", "Zp": "a paragraph separator"}


def _hidden(c: str) -> bool:
    return c not in _KEPT_CONTROLS and unicodedata.category(c) in _HIDDEN_CATEGORIES


def first_hidden(s: str) -> int | None:
    """Index of the first refused character in `s`, or None."""
    if s.isprintable():  # every refused character is unprintable: most strings stop here
        return None
    return next((i for i, c in enumerate(s) if _hidden(c)), None)


def describe(c: str) -> str:
    """'U+202E (RIGHT-TO-LEFT OVERRIDE, an invisible format character)': the code point, never the character."""
    name = unicodedata.name(c, "")
    words = _CATEGORY_WORDS[unicodedata.category(c)]
    return f"U+{ord(c):04X} ({name + ', ' if name else ''}{words})"


def visible(s: str) -> str:
    """`s` with each refused character written as its code point, e.g. '<U+001B>'."""
    if first_hidden(s) is None:
        return s
    return "".join(f"<U+{ord(c):04X}>" if _hidden(c) else c for c in s)
