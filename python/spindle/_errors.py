"""Exceptions raised by the spindle package."""


class SpindleError(Exception):
    """Base class of every error the spindle package raises."""


class EnvError(SpindleError, RuntimeError):
    """The training environment is incomplete or malformed.

    The message names the environment variable at fault. Spindle's executor
    sets every variable; this error usually means the script was started by
    hand rather than with ``spindle submit``.
    """


class FeedError(SpindleError, RuntimeError):
    """The feed could not be reached or sent bytes that break the protocol."""


class FeedTruncatedError(FeedError):
    """The feed stream ended before its end marker.

    The executor stopped or failed in the middle of an epoch; the epoch is
    incomplete and must not be taken for a short one.
    """


class UnsupportedTypeError(FeedError):
    """A column has a type this reader cannot decode.

    The pure-numpy Arrow reader decodes flat numeric, boolean, string,
    binary, date, timestamp and duration columns; install pyarrow for the
    rest, or leave the column out with ``--columns``.
    """
