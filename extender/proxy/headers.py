"""Which request headers the proxy forwards: those HTTP allows, and of those, what its HTTP client can send.

Two checks, at two depths. The head as it arrived (``head_problem``): each
header line must be ``name: value`` as RFC 9110 and 9112 define it, a token
for a name, a value of visible characters, spaces and tabs, no line folded
onto the next (obs-fold). Python's server does not check this: a line it
cannot read ends the head there, silently, and every header after it (a
Content-Length among them) is lost. The headers as they will be sent
(``unsendable``): exactly what requests, urllib3 and http.client accept, one
rule each, so that no header makes the client raise on the way out.

A refusal names the header and never shows its value: a name that is not a
token is shown escaped (``ascii``) and cut to ``NAME_SHOWN`` characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from urllib3.util import SKIP_HEADER

# Characters of a name shown in an error; the rest is cut.
NAME_SHOWN = 40
# RFC 9110 5.6.2 token: a field name.
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# RFC 9110 5.5 field value, without the optional whitespace around it: visible characters (VCHAR), obs-text
# (0x80-0xFF), and spaces and tabs between them. No control character: CR, LF and NUL least of all.
_FIELD_VALUE = re.compile(rb"[\x21-\x7e\x80-\xff]([\t \x21-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?|")
# requests (requests.utils.check_header_validity): a name with no leading whitespace and no colon, CR or LF; a value
# empty, or with no leading whitespace and no CR or LF anywhere. Whitespace as Python's str patterns read it, Unicode
# too: a value that begins with NBSP (0xA0), NEL (0x85) or 0x1C-0x1F is refused.
_CLIENT_NAME = re.compile(r"[^:\s][^:\r\n]*")
_CLIENT_VALUE = re.compile(r"(\S[^\r\n]*)?")


def shown(name: bytes | str) -> str:
    """A header name as an error may show it: escaped, cut, quoted."""
    text = name.decode("latin-1") if isinstance(name, bytes) else name
    cut = text[:NAME_SHOWN]
    return ascii(cut) + ("…" if len(text) > NAME_SHOWN else "")


def head_problem(lines: Iterable[bytes]) -> str | None:
    """What is wrong with the first header line of a request head that HTTP does not allow; None if none is.

    ``lines`` are the head's header lines as received, each with its line ending, the empty line that ends the head
    included or not.
    """
    previous: bytes | None = None
    for number, raw in enumerate(lines, start=2):  # line 1 is the request line
        line = raw.removesuffix(b"\n").removesuffix(b"\r")
        if not line:
            break
        where = f"line {number} of the request head"
        if line[:1] in (b" ", b"\t"):
            if previous is None:
                return f"{where} begins with whitespace: a header line starts with its name"
            return f"header {shown(previous)} is folded onto {where} (obs-fold): send each header on one line"
        name, colon, value = line.partition(b":")
        if not colon:
            return f"{where} has no colon: a header line is name: value"
        if not name:
            return f"{where} has an empty header name"
        if not _TOKEN.fullmatch(name):
            return f"header {shown(name)} ({where}): a header name is a token (letters, digits, !#$%&'*+-.^_`|~)"
        if not _FIELD_VALUE.fullmatch(value.strip(b" \t")):
            return (
                f"the value of header {shown(name)} holds a control character (CR, LF, NUL or another byte HTTP "
                "does not allow in a header)"
            )
        previous = name
    return None


def unsendable(headers: Iterable[tuple[str, str]]) -> str | None:
    """What is wrong with the first header the outgoing client would refuse to send; None if it sends them all.

    http.client encodes a name as ASCII and a value as Latin-1 and refuses a CR or LF not followed by whitespace;
    urllib3 takes a value of ``SKIP_HEADER`` for "do not send this header" (refused for most names); requests
    refuses what ``_CLIENT_NAME`` and ``_CLIENT_VALUE`` do not match, which leaves http.client nothing more to refuse.
    """
    for name, value in headers:
        if not (name.isascii() and _CLIENT_NAME.fullmatch(name)):
            return f"header {shown(name)}: the outgoing HTTP client cannot send a header of this name"
        if value == SKIP_HEADER or not (_latin_1(value) and _CLIENT_VALUE.fullmatch(value)):
            return (
                f"the value of header {shown(name)} cannot be sent on: the outgoing HTTP client refuses a value that "
                "begins with whitespace other than a space (NBSP, NEL, 0x1C-0x1F), holds CR, LF or a character "
                "beyond Latin-1, or is urllib3's marker for a header not to send"
            )
    return None


def _latin_1(text: str) -> bool:
    return all(ord(character) < 0x100 for character in text)
