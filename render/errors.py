"""The one error type the site build stops on."""
from collect.schema.chars import visible


class DataError(Exception):
    """Bad data: names the file, the field and the offending value, and how to fix it.

    The message quotes data (a folder name, a value), and it goes to a terminal and into pages: each
    character a reader cannot see (ESC would drive the terminal) is written as its code point."""

    def __init__(self, message: str):
        super().__init__(visible(str(message)))
