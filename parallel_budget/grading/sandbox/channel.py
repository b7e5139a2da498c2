"""Length-prefixed JSON messages over a stream socket: the grader's channel to the function host (:mod:`.fnhost`).

A message is an 8-byte big-endian length and that many bytes of UTF-8 JSON,
sent and read in a loop, so its size is bounded only by the ``limit`` the
reader gives (a whole notebook's cells, up to :data:`.bounds.MAX_NOTEBOOK_BYTES`,
fits; a datagram was cut at the socket buffer, about 212 KB).  The reader
never trusts the length: over ``limit`` is a :class:`ValueError`, and a
``timeout`` bounds the whole message, not each read.
"""

from __future__ import annotations

import json
import struct
import time

_HEADER = struct.Struct("!Q")
_CHUNK = 1 << 20


def send(sock, message, timeout: float | None = None) -> None:
    """Send one message; ``TimeoutError`` when the peer does not take it within ``timeout`` seconds."""
    data = json.dumps(message, ensure_ascii=False).encode("utf-8")
    sock.settimeout(timeout)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _read(sock, size: int, deadline: float | None) -> bytes | None:
    """Exactly ``size`` bytes; None when the peer closed before the first; ValueError when it closed midway."""
    chunks, got = [], 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("message not complete in time")
            sock.settimeout(left)
        chunk = sock.recv(min(size - got, _CHUNK))
        if not chunk:
            if got == 0 and chunks == []:
                return None
            raise ValueError("message cut short")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(sock, limit: int, timeout: float | None = None):
    """One message (any JSON value), or None when the peer closed the channel.

    ``ValueError`` for a message over ``limit`` bytes, cut short or not JSON; ``TimeoutError``
    when the whole message has not arrived within ``timeout`` seconds.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    header = _read(sock, _HEADER.size, deadline)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > limit:
        raise ValueError(f"message of {size} bytes, over {limit}")
    body = _read(sock, size, deadline) if size else b""
    if body is None:
        raise ValueError("message cut short")
    return json.loads(body.decode("utf-8"))
