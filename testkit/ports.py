"""A loopback port for a server the caller is about to start.

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range,
the same range outgoing connections take their source ports from. Between
the check and the server's own bind, any connection on the machine (the
server's own start-up call to an API stand-in, say) may take it, and the
server then fails with "Address already in use". A port below that range is
never handed to an outgoing connection, so only another listener can take it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000


def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; IANA's dynamic range starts higher still


def free_port() -> int:
    """A loopback TCP port below the ephemeral range that nothing listens on now."""
    high = _ephemeral_low()
    if high - _LOWEST < 1000:  # an unusual range: fall back to the kernel's pick
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    for _ in range(200):
        port = random.randrange(_LOWEST, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port between {_LOWEST} and {high}")
