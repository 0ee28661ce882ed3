"""Go's encoding/pem Decode: the blocks client-go finds in ``caData``, ``certData`` and ``keyData``.

It skips text around blocks, needs an ``-----END <type>-----`` line matching the ``BEGIN`` one, and passes over a
block whose body is not base64 (Go's decoder, line breaks skipped) to look for the next.
"""

from __future__ import annotations

from typing import NamedTuple

from extender.cli.scheduler_config.gobase64 import Base64Error, decode_std

_BEGIN = b"\n-----BEGIN "
_END = b"\n-----END "
_DASHES = b"-----"


class Block(NamedTuple):
    type: str
    headers: dict[str, str]
    bytes: bytes


def decode(data: bytes) -> tuple[Block | None, bytes]:
    """The first PEM block of ``data`` and what follows it, or (None, data) when there is none."""
    rest = data
    while True:
        if rest.startswith(_BEGIN[1:]):
            rest = rest[len(_BEGIN) - 1 :]
        elif _BEGIN in rest:
            rest = rest[rest.index(_BEGIN) + len(_BEGIN) :]
        else:
            return None, data
        type_line, rest = _line(rest)
        if not type_line.endswith(_DASHES):
            continue
        type_name = type_line[: -len(_DASHES)]
        headers: dict[str, str] = {}
        while True:
            if not rest:
                return None, data
            line, following = _line(rest)
            key, colon, value = line.partition(b":")
            if not colon:
                break
            headers[key.strip().decode("latin-1")] = value.strip().decode("latin-1")
            rest = following
        if not headers and rest.startswith(_END[1:]):
            end, trailer_at = 0, len(_END) - 1
        else:
            end = rest.find(_END)
            trailer_at = end + len(_END)
        if end < 0:
            continue
        trailer = rest[trailer_at:]
        trailer_length = len(type_name) + len(_DASHES)
        if len(trailer) < trailer_length:
            continue
        after_end, trailer = trailer[trailer_length:], trailer[:trailer_length]
        if not trailer.startswith(type_name) or not trailer.endswith(_DASHES):
            continue
        if _line(after_end)[0]:
            continue
        body = rest[:end].replace(b" ", b"").replace(b"\t", b"")
        try:
            decoded = decode_std(body)
        except Base64Error:
            continue
        _, rest = _line(rest[end + len(_END) - 1 :])
        return Block(type_name.decode("latin-1"), headers, decoded), rest


def blocks(data: bytes) -> list[Block]:
    """Every block of ``data``, in order, as a loop over Decode finds them."""
    found: list[Block] = []
    while True:
        block, data = decode(data)
        if block is None:
            return found
        found.append(block)


def _line(data: bytes) -> tuple[bytes, bytes]:
    """Go's getLine: the first line without its line break and trailing spaces or tabs, and the rest."""
    index = data.find(b"\n")
    if index < 0:
        line, rest = data, b""
    else:
        line, rest = data[:index], data[index + 1 :]
        if line.endswith(b"\r"):
            line = line[:-1]
    return line.rstrip(b" \t"), rest
