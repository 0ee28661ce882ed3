"""Go's base64.StdEncoding.Decode, error offsets included: how kube-scheduler reads a ``[]byte`` field
(``tlsConfig.caData``) and a PEM block's body.

It skips line breaks anywhere and is otherwise strict (padding required, nothing after it), and names the first
offending byte: ``illegal base64 data at input byte 3``.
"""

from __future__ import annotations

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_VALUES = {char: index for index, char in enumerate(_ALPHABET)}


class Base64Error(ValueError):
    """Go's base64.CorruptInputError."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"illegal base64 data at input byte {offset}")
        self.offset = offset


def decode_std(text: str | bytes) -> bytes:
    """The bytes ``text`` encodes, or Base64Error at the offset Go reports."""
    data = text.encode("latin-1", "replace") if isinstance(text, str) else text
    out = bytearray()
    at = 0
    while at < len(data):
        at, chunk = _quantum(data, at)
        out += chunk
    return bytes(out)


def _quantum(data: bytes, at: int) -> tuple[int, bytes]:
    """One 4-character quantum from ``at`` (Go's decodeQuantum): where the next starts, and its bytes."""
    values: list[int] = []
    length = 4
    while len(values) < 4:
        if at == len(data):
            if not values:
                return at, b""
            raise Base64Error(at - len(values))
        char = chr(data[at])
        at += 1
        if char in _VALUES:
            values.append(_VALUES[char])
            continue
        if char in "\r\n":
            continue
        if char != "=" or len(values) < 2:
            raise Base64Error(at - 1)
        if len(values) == 2:  # "==" expected: the first "=" is read
            while at < len(data) and chr(data[at]) in "\r\n":
                at += 1
            if at == len(data):
                raise Base64Error(len(data))
            if chr(data[at]) != "=":
                raise Base64Error(at - 1)
            at += 1
        while at < len(data) and chr(data[at]) in "\r\n":
            at += 1
        if at < len(data):
            raise Base64Error(at)  # something after the padding
        length = len(values)
        break
    values += [0] * (4 - len(values))
    number = values[0] << 18 | values[1] << 12 | values[2] << 6 | values[3]
    return at, number.to_bytes(3, "big")[: length - 1]
