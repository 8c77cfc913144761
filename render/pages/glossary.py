"""Glossary: the public names of our kernels and the techniques they use; the page is plain Markdown."""
from __future__ import annotations

from .base import Page


class GlossaryPage(Page):
    slug = "glossary"
    phase = "env"
