"""Errors that mean "the input is wrong", as opposed to a bug.

The CLI prints them and exits 2; their messages name the record and the field.
"""


class InputError(ValueError):
    """Bad input data, e.g. a malformed line in strict mode (``line N: why``)."""
