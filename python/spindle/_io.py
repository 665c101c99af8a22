"""Exact reads from a byte stream, with errors that say where the stream ended."""

from ._errors import FeedError, FeedTruncatedError


def truncated(name, what):
    """Return the error of a stream from name that ended early, while reading what."""
    return FeedTruncatedError(f"{name}: stream ended {what} (the executor stopped or failed mid-epoch)")


class ExactReader:
    """Reads exact byte counts from a buffered binary file object.

    name (the socket or file path) prefixes every error. A stream that
    ends early raises :class:`FeedTruncatedError` saying what was being
    read.
    """

    def __init__(self, f, name):
        self._f = f
        self.name = name
        self._prefix = b""

    def push_back(self, data):
        """Make the next reads return data first (used to sniff a stream's format)."""
        self._prefix = data + self._prefix

    def _take_prefix(self, n):
        data, self._prefix = self._prefix[:n], self._prefix[n:]
        return data

    def read_exact(self, n, what, allow_eof=False):
        """Read n bytes. With allow_eof, a stream already at its end returns b""."""
        data = self._take_prefix(n)
        if len(data) < n:
            try:
                data += self._f.read(n - len(data))
            except OSError as e:
                raise FeedError(f"{self.name}: read failed {what}: {e}") from None
        if len(data) == n:
            return data
        while 0 < len(data) < n:
            try:
                more = self._f.read(n - len(data))
            except OSError as e:
                raise FeedError(f"{self.name}: read failed {what}: {e}") from None
            if not more:
                break
            data += more
        if len(data) == n:
            return data
        if allow_eof and not data:
            return b""
        raise truncated(self.name, what)

    def read_into(self, arr, what):
        """Fill the contiguous numpy array arr from the stream."""
        view = memoryview(arr).cast("B")
        pre = self._take_prefix(len(view))
        view[:len(pre)] = pre
        got = len(pre)
        total = len(view)
        while got < total:
            try:
                n = self._f.readinto(view[got:])
            except OSError as e:
                raise FeedError(f"{self.name}: read failed {what}: {e}") from None
            if not n:
                raise truncated(self.name, what)
            got += n
        return arr

