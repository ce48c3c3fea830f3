"""The one exception type the CLI turns into a one-line message and exit status 2."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: a malformed dump, an impossible size, an unknown name.

    The message is the whole story: the CLI prints ``ane-kdma: <message>`` on
    stderr and exits with status 2, never with a traceback.
    """
