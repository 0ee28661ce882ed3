"""JSON as Go's encoding/json reads it: the syntax errors in its words, numbers kept as written, keys set twice kept.

kube-scheduler reads a configuration file that starts with ``{`` as JSON, not YAML (apimachinery's IsJSONBuffer):
then a trailing comma, a single quote, a tab-free YAML flow mapping or ``NaN`` stop it, and ``5.0`` is not an
integer. The values come back as a tree of ``Pairs`` (objects, every key in order, repeats included), lists, str,
bool, None and ``Number`` (the literal's text), the shape the typed decoder (``godecode``) reads.
"""

from __future__ import annotations

from typing import Any

_WHITESPACE = " \t\r\n"


class Number(str):
    """A JSON number as written (``5``, ``5.0``, ``1e3``): Go decides per target type whether it fits."""

    __slots__ = ()


class Pairs(list[tuple[str, Any]]):
    """A JSON object: its (key, value) pairs in order, a key set twice appearing twice."""

    __slots__ = ()


class JSONSyntaxError(ValueError):
    """Go's ``*json.SyntaxError`` text: ``invalid character 'a' looking for beginning of object key string``."""


def is_json_buffer(text: str) -> bool:
    """apimachinery's IsJSONBuffer: the first non-whitespace character is ``{``."""
    return text.lstrip(_WHITESPACE).startswith("{")


def parse(text: str) -> Any:
    """The value of a JSON text, or JSONSyntaxError as Go's scanner reports the first invalid byte."""
    parser = _Parser(text)
    parser.skip_space()
    value = parser.value()
    parser.skip_space()
    if parser.at < len(text):
        raise parser.error("after top-level value")
    return value


def quote_char(char: str) -> str:
    """Go's quoteChar: how the scanner shows an offending byte (a non-ASCII character by its first UTF-8 byte)."""
    byte = char.encode("utf-8")[0]
    if byte == ord("'"):
        return "'\\''"
    if byte == ord('"'):
        return "'\"'"
    shown = chr(byte)
    if shown == "\\":
        return "'\\\\'"
    if byte < 0x20 or byte == 0x7F:
        escapes = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}
        return "'" + escapes.get(shown, f"\\x{byte:02x}") + "'"
    return f"'{shown}'"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def error(self, context: str) -> JSONSyntaxError:
        if self.at >= len(self.text):
            return JSONSyntaxError("unexpected end of JSON input")
        return JSONSyntaxError(f"invalid character {quote_char(self.text[self.at])} {context}")

    def skip_space(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in _WHITESPACE:
            self.at += 1

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def value(self) -> Any:
        char = self.peek()
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            return self.string()
        if char == "-" or (char.isascii() and char.isdigit()):
            return self.number()
        for word, result in (("true", True), ("false", False), ("null", None)):
            if char == word[0]:
                return self.literal(word, result)
        raise self.error("looking for beginning of value")

    def object(self) -> Pairs:
        self.at += 1
        pairs = Pairs()
        self.skip_space()
        if self.peek() == "}":
            self.at += 1
            return pairs
        while True:
            if self.peek() != '"':
                raise self.error("looking for beginning of object key string")
            key = self.string()
            self.skip_space()
            if self.peek() != ":":
                raise self.error("after object key")
            self.at += 1
            self.skip_space()
            pairs.append((key, self.value()))
            self.skip_space()
            if self.peek() == ",":
                self.at += 1
                self.skip_space()
                continue
            if self.peek() == "}":
                self.at += 1
                return pairs
            raise self.error("after object key:value pair")

    def array(self) -> list[Any]:
        self.at += 1
        items: list[Any] = []
        self.skip_space()
        if self.peek() == "]":
            self.at += 1
            return items
        while True:
            items.append(self.value())
            self.skip_space()
            if self.peek() == ",":
                self.at += 1
                self.skip_space()
                continue
            if self.peek() == "]":
                self.at += 1
                return items
            raise self.error("after array element")

    def string(self) -> str:
        self.at += 1
        out: list[str] = []
        while True:
            char = self.peek()
            if char == "":
                raise self.error("in string literal")
            if char == '"':
                self.at += 1
                return "".join(out)
            if ord(char) < 0x20:
                raise self.error("in string literal")
            if char != "\\":
                out.append(char)
                self.at += 1
                continue
            self.at += 1
            escape = self.peek()
            simple = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
            if escape in simple:
                out.append(simple[escape])
                self.at += 1
            elif escape == "u":
                self.at += 1
                out.append(self.unicode_escape())
            else:
                raise self.error("in string escape code")

    def unicode_escape(self) -> str:
        digits = ""
        for _ in range(4):
            char = self.peek()
            if not char or char not in "0123456789abcdefABCDEF":
                raise self.error("in \\u hexadecimal character escape")
            digits += char
            self.at += 1
        code = int(digits, 16)
        if 0xD800 <= code < 0xDC00 and self.text.startswith("\\u", self.at):
            low = self.text[self.at + 2 : self.at + 6]
            if len(low) == 4 and all(c in "0123456789abcdefABCDEF" for c in low) and 0xDC00 <= int(low, 16) < 0xE000:
                self.at += 6
                return chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00))
        return "\ufffd" if 0xD800 <= code < 0xE000 else chr(code)

    def number(self) -> Number:
        start = self.at
        if self.peek() == "-":
            self.at += 1
        if self.peek() == "0":
            self.at += 1
        elif self.peek().isascii() and self.peek().isdigit():
            self.digits()
        else:
            raise self.error("in numeric literal")
        if self.peek() == ".":
            self.at += 1
            if not (self.peek().isascii() and self.peek().isdigit()):
                raise self.error("after decimal point in numeric literal")
            self.digits()
        if self.peek() in ("e", "E"):
            self.at += 1
            if self.peek() in ("+", "-"):
                self.at += 1
            if not (self.peek().isascii() and self.peek().isdigit()):
                raise self.error("in exponent of numeric literal")
            self.digits()
        return Number(self.text[start : self.at])

    def digits(self) -> None:
        while self.peek().isascii() and self.peek().isdigit():
            self.at += 1

    def literal(self, word: str, result: Any) -> Any:
        for expected in word:
            if self.peek() != expected:
                raise self.error(f"in literal {word} (expecting {quote_char(expected)})")
            self.at += 1
        return result
