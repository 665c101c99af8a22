"""The feed through shared memory: an executor's ``<socket>.shm`` stream read as the plain socket's bytes.

The executor writes each message of the epoch (an Arrow IPC message, or
the tensor header and batch frames) into a memory region the two
processes share and sends only its place over the socket
(docs/feed-protocol.md, "Shared memory"). :class:`ShmStream` copies each
message out of the region as the plain stream's readers ask for its
bytes, hands the space back at once, and ends the stream the way the
plain socket's stream ends, so the same readers serve both and a cut
stream is a cut stream.
"""

import array
import ctypes
import mmap
import os
import socket
import struct
import threading
import weakref

import numpy as np

from ._errors import FeedError
from ._io import truncated

_FRAME = struct.Struct("<B7xQQ")
_FREE = struct.Struct("<Q")
_ABANDON = (1 << 64) - 1
# Held epoch ends: an 'R' frame with _HOLDS set offers 'H' frames, which a
# client that said _HELLO answers with _AT_HOLD once its process asks for
# the message after the last one sent (the executor ends the epoch only
# then, docs/feed-protocol.md).
_HOLDS = 1
_HELLO = (1 << 64) - 2
_AT_HOLD = (1 << 64) - 3
_TENSOR_MAGIC = b"SPTF"
# How the plain stream ends: Arrow's end-of-stream marker, or a tensor
# batch of zero rows.
_ARROW_END = b"\xff\xff\xff\xff\x00\x00\x00\x00"
_TENSOR_END = b"\x00\x00\x00\x00"
_MAX_INLINE = 4 << 30
_DRAIN_SECONDS = 5.0


def shm_path(path):
    """Return the shared-memory socket beside the feed socket at path."""
    return path + ".shm"


def connect(path, read_buffer):
    """Connect to the shared-memory socket beside path; None when there is none."""
    spath = shm_path(path)
    if not os.path.exists(spath):
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(spath)
    except (FileNotFoundError, ConnectionRefusedError):
        s.close()
        return None
    except OSError as e:
        s.close()
        raise FeedError(f"connect to feed {spath}: {e.strerror or e}") from None
    try:
        return ShmStream(s, spath, read_buffer)
    except BaseException:
        s.close()
        raise


class ShmStream:
    """Reads a shared-memory stream with :class:`spindle._io.ExactReader`'s methods; close() ends it."""

    def __init__(self, sock, name, read_buffer):
        self.name = name
        self._sock = sock
        self._lock = threading.Lock()  # frees may come while reading
        self._mm = None
        self._prefix = b""
        self._msg = None  # memoryview of the message being read
        self._pos = 0
        self._off = None  # its offset in the region; None inline
        self._end = None  # the plain stream's ending, once the first message says which
        self._state = "open"  # "ended" after the end frame, "cut" without it
        self._cut = "before the end-of-epoch frame"  # where, once cut
        self._lent = 0  # messages handed out by take_message, not yet garbage
        self._closed = False  # close() was called; the socket waits for _lent
        first, fd = self._recv_first()
        self._f = sock.makefile("rb", buffering=read_buffer)
        if fd is not None:
            try:
                kind, size, flags = _FRAME.unpack(first) if len(first) == _FRAME.size else (0, 0, 0)
                if kind != ord("R"):
                    raise FeedError(f"{name}: a memory region came with a {chr(kind)!r} frame")
                self._mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)
            first = b""
            if flags & _HOLDS:
                self._free(_HELLO)  # before any free: this client answers 'H' frames
        self._frames_prefix = first  # the start of the frames, without a region

    def _recv_first(self):
        try:
            data, anc, _, _ = self._sock.recvmsg(_FRAME.size, socket.CMSG_SPACE(4))
        except OSError as e:
            raise FeedError(f"{self.name}: read failed at the stream's start: {e}") from None
        fd = None
        for level, typ, payload in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
                for i, f in enumerate(fds):
                    if i == 0:
                        fd = f
                    else:
                        os.close(f)
        return data, fd

    # Frames.

    def _read_frame_bytes(self, n):
        data, self._frames_prefix = self._frames_prefix[:n], self._frames_prefix[n:]
        while len(data) < n:
            try:
                more = self._f.read(n - len(data))
            except (ConnectionResetError, socket.timeout):
                more = b""
            except OSError as e:
                raise FeedError(f"{self.name}: read failed: {e}") from None
            if not more:
                break
            data += more
        return data

    def _next_message(self):
        """Load the next message; False at the end of the stream (or its cut, where _cut says)."""
        kind = ord("H")
        while kind == ord("H"):
            head = self._read_frame_bytes(_FRAME.size)
            if len(head) < _FRAME.size:
                self._state = "cut"
                return False
            kind, a, b = _FRAME.unpack(head)
            if kind == ord("H"):
                # The process asks for the message after the last one sent:
                # the executor waits for that to end the epoch.
                self._free(_AT_HOLD)
        if kind == ord("E"):
            self._state = "ended"
            return False
        if kind == ord("I"):
            if a > _MAX_INLINE:
                raise FeedError(f"{self.name}: malformed stream: an inline message of {a} bytes")
            data = self._read_frame_bytes(a)
            if len(data) < a:
                self._state, self._cut = "cut", "inside a message"
                return False
            self._msg, self._off = memoryview(data), None
        elif kind == ord("M"):
            if self._mm is None or a + b > len(self._mm):
                raise FeedError(f"{self.name}: malformed stream: a message at {a}+{b} outside the shared memory")
            self._msg, self._off = memoryview(self._mm)[a:a + b], a
        else:
            raise FeedError(f"{self.name}: malformed stream: unknown frame kind {kind:#x}")
        self._pos = 0
        if self._end is None:
            self._end = _TENSOR_END if bytes(self._msg[:4]) == _TENSOR_MAGIC else _ARROW_END
        return True

    def _done_with_message(self):
        if self._msg is not None:
            self._msg.release()
            self._msg = None
        if self._off is not None:
            self._free(self._off)
            self._off = None

    def _free(self, off):
        with self._lock:
            try:
                self._sock.sendall(_FREE.pack(off))
            except OSError:
                pass  # the executor has gone; nothing to hand back

    def take_message(self):
        """Return the next whole message as a uint8 array, or None after the end frame.

        A message in shared memory is not copied: the array (and every view
        of it) is the region's bytes, handed back to the executor once they
        are all garbage. Call only between messages (after a reader has taken
        the previous one whole, or looked into it and given it back).
        """
        if not (self._msg is not None and self._pos == 0 and not self._prefix):
            self._done_with_message()
            if self._prefix:
                raise FeedError(f"{self.name}: a message taken whole in the middle of another")
            if self._state == "ended":
                return None
            if self._state != "open" or not self._next_message():
                if self._state == "ended":
                    return None
                raise truncated(self.name, self._cut)
        msg, off = self._msg, self._off
        self._msg = self._off = None
        n = len(msg)
        if off is None:
            data = bytearray(msg)
            msg.release()
            return np.frombuffer(data, dtype=np.uint8)
        msg.release()
        return self._lend(off, n)

    def _lend(self, off, n):
        """Return the n bytes at off in the region as an array, handed back once it is garbage."""
        owner = (ctypes.c_char * n).from_buffer(self._mm, off)
        with self._lock:
            self._lent += 1
        weakref.finalize(owner, self._give_back, off)
        return np.frombuffer(owner, dtype=np.uint8)

    def _give_back(self, off):
        """A message take_message lent is garbage: hand it back, and close once the last one is."""
        self._free(off)
        with self._lock:
            self._lent -= 1
            last = self._closed and self._lent == 0
        if last:
            self._close_now()

    # The plain stream's bytes.

    def _take(self, n):
        """Return up to n bytes of the stream as memoryviews (empty at its end)."""
        parts = []
        while n > 0:
            if self._prefix:
                k = min(n, len(self._prefix))
                parts.append(memoryview(self._prefix[:k]))
                self._prefix = self._prefix[k:]
                n -= k
                continue
            if self._msg is None or self._pos == len(self._msg):
                self._done_with_message()
                if self._state != "open":
                    break
                if not self._next_message():
                    if self._state == "ended":
                        self._prefix = self._end or _ARROW_END
                    continue
            k = min(n, len(self._msg) - self._pos)
            parts.append(self._msg[self._pos:self._pos + k])
            self._pos += k
            n -= k
        return parts

    def push_back(self, data):
        """Make the next reads return data first."""
        n = len(data)
        if not self._prefix and self._msg is not None and self._pos >= n \
                and self._msg[self._pos - n:self._pos] == data:
            self._pos -= n  # given back where it came from: take_message can still lend the message whole
            return
        self._prefix = bytes(data) + self._prefix

    def read_exact(self, n, what, allow_eof=False):
        """Read n bytes, as ExactReader.read_exact."""
        parts = self._take(n)
        data = b"".join(parts)
        for p in parts:
            p.release()
        if len(data) == n:
            return data
        if allow_eof and not data:
            return b""
        raise truncated(self.name, what)

    def read_into(self, arr, what):
        """Fill the contiguous numpy array arr, as ExactReader.read_into."""
        view = memoryview(arr).cast("B")
        got = 0
        for p in self._take(len(view)):
            view[got:got + len(p)] = p
            got += len(p)
            p.release()
        if got < len(view):
            raise truncated(self.name, what)
        return arr

    def close(self):
        """End the epoch: an unfinished one is abandoned and its messages handed back.

        The connection stays open while arrays lent by take_message are
        alive: they are handed back over it.
        """
        self._done_with_message()
        if self._state == "open":
            self._free(_ABANDON)
            self._drain()
        with self._lock:
            self._closed = True
            now = self._lent == 0
        if now:
            self._close_now()

    def _close_now(self):
        try:
            self._f.close()
        finally:
            self._sock.close()
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # a view is still alive; the mapping goes with it
            self._mm = None

    def _drain(self):
        """Hand back the messages sent before the executor saw the epoch abandoned."""
        self._sock.settimeout(_DRAIN_SECONDS)
        try:
            while self._next_message():
                self._done_with_message()
        except (FeedError, OSError):
            pass
        self._done_with_message()
