"""The one error type the site build stops on."""


class DataError(Exception):
    """Bad data: names the file, the field and the offending value, and how to fix it."""
