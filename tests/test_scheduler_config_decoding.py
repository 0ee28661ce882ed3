"""extender.cli.scheduler_config's decoding layer: YAML as go-yaml v2 reads it, JSON as encoding/json does, Go's
typed decoding with its errors, and Go's base64, durations and PEM."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from extender.cli.scheduler_config import godecode, gojson, gopem, goyaml
from extender.cli.scheduler_config.gobase64 import Base64Error, decode_std
from extender.cli.scheduler_config.goduration import DurationError, parse_duration
from extender.cli.scheduler_config.gojson import Number, Pairs

# --- YAML: go-yaml v2's scalars, merge keys and documents ----------------------------------------------------------


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("y", True),
        ("Yes", True),
        ("on", True),
        ("n", False),
        ("OFF", False),
        ("~", None),
        ("", None),
        ("1e3", Number("1000")),
        ("5.0", Number("5")),
        ("08", Number("8")),
        ("0x10", Number("16")),
        ("0o17", Number("15")),
        ("012", Number("10")),
        ("1_000", Number("1000")),
        ("+5", Number("5")),
        (".5", Number("0.5")),
        ("9223372036854775808", Number("9223372036854775808")),
        ("1e21", Number("1e+21")),
        ("1:30", "1:30"),
        ("2001-12-14", "2001-12-14"),
        ("1e400", "1e400"),
        ("'5'", "5"),
        ("!!str 5", "5"),
        ("!!float 5", Number("5")),
        ("yes please", "yes please"),
        ("0x", "0x"),
        ('"y"', "y"),
    ],
)
def test_scalars_resolve_as_go_yaml_v2_resolves_them(scalar: str, value: Any) -> None:
    assert goyaml.decode(f"k: {scalar}\n").value == {"k": value}


def test_keys_resolve_too() -> None:
    assert goyaml.decode("y: 1\n1: a\ntrue: b\n").value == {"true": "b", "1": "a"}
    assert goyaml.decode("y: 1\nyes: 2\n").duplicates == ["line 2: key true already set in map"]


def test_a_merge_key_sets_keys_over_those_before_and_under_those_after_it() -> None:
    text = "base: &b {a: 1, b: 2}\nx:\n  a: 0\n  <<: *b\n  b: 3\n"
    decoded = goyaml.decode(text)
    assert decoded.value["x"] == {"a": Number("1"), "b": Number("3")}
    # UnmarshalStrict counts each a key set twice, at the line of the value that repeats it.
    assert decoded.duplicates == ['line 1: key "a" already set in map', 'line 5: key "b" already set in map']
    assert goyaml.decode("base: &b {a: 1}\nx:\n  <<: *b\n  c: 2\n") == goyaml.Decoded(
        {"base": {"a": Number("1")}, "x": {"a": Number("1"), "c": Number("2")}}, []
    )


def test_an_anchor_name_may_be_used_again_and_the_later_counts() -> None:
    assert goyaml.decode("a: &x 1\nb: *x\nc: &x 2\nd: *x\n").value == {
        "a": Number("1"),
        "b": Number("1"),
        "c": Number("2"),
        "d": Number("2"),
    }


def test_a_merge_of_a_list_takes_the_earlier_mapping_first() -> None:
    decoded = goyaml.decode("one: &one {a: 1}\ntwo: &two {a: 2, b: 2}\nx:\n  <<: [*one, *two]\n")
    assert decoded.value["x"] == {"a": Number("1"), "b": Number("2")}


def test_only_the_first_document_counts() -> None:
    assert goyaml.decode("a: 1\n---\nb: [\n").value == {"a": Number("1")}
    assert goyaml.decode("---\n---\na: 1\n").value is None
    assert goyaml.decode("# only a comment\n").value is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a:\n\t- b\n", "found character '\\t' that cannot start any token"),
        ("a: [1, 2\n", "line 2"),
        ("a: .inf\n", "json: unsupported value: +Inf"),
        ("a: !!int x\n", "cannot decode !!str `x` as a !!int"),
    ],
)
def test_what_go_yaml_or_json_cannot_take_stops_decoding(text: str, message: str) -> None:
    with pytest.raises(goyaml.YAMLError) as raised:
        goyaml.decode(text)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1000.0, "1000"),
        (1.5, "1.5"),
        (1e21, "1e+21"),
        (1.5e-7, "1.5e-7"),
        (-0.0, "-0"),
        (1e20, "100000000000000000000"),
    ],
)
def test_floats_are_written_as_go_json_writes_them(value: float, text: str) -> None:
    assert goyaml.go_float_json(value) == text


# --- JSON: encoding/json's syntax and words ------------------------------------------------------------------------


def test_json_keeps_numbers_as_written_and_keys_set_twice() -> None:
    assert gojson.parse('\t{"a": 5.0, "a": [1e3, true, null, "x"]}') == Pairs(
        [("a", Number("5.0")), ("a", [Number("1e3"), True, None, "x"])]
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{a: 1}", "invalid character 'a' looking for beginning of object key string"),
        ('{"a": 1,}', "invalid character '}' looking for beginning of object key string"),
        ("[1,]", "invalid character ']' looking for beginning of value"),
        ('{"a": 01}', "invalid character '1' after object key:value pair"),
        ('{"a": 1.}', "invalid character '}' after decimal point in numeric literal"),
        ('{"a": tru}', "invalid character '}' in literal true (expecting 'e')"),
        ('{"a" 1}', "invalid character '1' after object key"),
        ('{"a": "\\x"}', "invalid character 'x' in string escape code"),
        ('{"a": NaN}', "invalid character 'N' looking for beginning of value"),
        ('{"a": 1} x', "invalid character 'x' after top-level value"),
        ('{"a": ', "unexpected end of JSON input"),
    ],
)
def test_json_syntax_errors_are_go_s(text: str, message: str) -> None:
    with pytest.raises(gojson.JSONSyntaxError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        gojson.parse(text)


def test_a_file_is_json_when_it_starts_with_a_brace() -> None:
    assert gojson.is_json_buffer(' \n\t{"a": 1}')
    assert not gojson.is_json_buffer("\ufeff{}") and not gojson.is_json_buffer("[{}]")


# --- Go's typed decoding ---------------------------------------------------------------------------------------------

_EXTENDER = godecode.Struct(
    "Extender",
    "v1.Extender",
    {
        "weight": godecode.Field(godecode.INT64),
        "ignorable": godecode.Field(godecode.BOOL),
        "httpTimeout": godecode.Field(godecode.Duration()),
        "caData": godecode.Field(godecode.Bytes()),
        "tls": godecode.Field(
            godecode.Pointer(godecode.Struct("TLS", "v1.TLS", {"insecure": godecode.Field(godecode.BOOL)}))
        ),
    },
)
_TOP = godecode.Struct("Top", "v1.Top", {"extenders": godecode.Field(godecode.Slice(_EXTENDER, "[]v1.Extender"))})


def _decode(*extenders: Any) -> godecode.Result:
    return godecode.decode({"extenders": list(extenders)}, _TOP)


def test_absent_fields_take_go_s_zero_values_and_null_leaves_them() -> None:
    result = _decode({"weight": None, "tls": None})
    assert result.value == {
        "extenders": [{"weight": 0, "ignorable": False, "httpTimeout": 0, "caData": b"", "tls": None}]
    }
    assert (result.fatal, result.strict, result.written) == (
        [],
        [],
        {"extenders", "extenders[0].weight", "extenders[0].tls"},
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "weight",
            Number("5.0"),
            "json: cannot unmarshal number 5.0 into Go struct field Extender.extenders.weight of type int64",
        ),
        (
            "weight",
            Number("9223372036854775808"),
            (
                "json: cannot unmarshal number 9223372036854775808 into Go struct field Extender.extenders.weight of "
                "type int64"
            ),
        ),
        ("weight", "5", "json: cannot unmarshal string into Go struct field Extender.extenders.weight of type int64"),
        (
            "ignorable",
            "true",
            "json: cannot unmarshal string into Go struct field Extender.extenders.ignorable of type bool",
        ),
        (
            "httpTimeout",
            Number("5"),
            "json: cannot unmarshal number into Go struct field Extender.extenders.httpTimeout of type string",
        ),
        ("httpTimeout", None, 'time: invalid duration ""'),
        ("httpTimeout", "5", 'time: missing unit in duration "5"'),
        ("tls", "insecure", "json: cannot unmarshal string into Go struct field Extender.extenders.tls of type v1.TLS"),
        (
            "caData",
            "not-base64!",
            (
                "illegal base64 data at input byte 3: a *Data field holds base64 of the PEM file, such as base64 -w0 "
                "ca.pem writes"
            ),
        ),
    ],
)
def test_wrong_values_are_go_s_errors_and_leave_the_zero_value(field: str, value: Any, message: str) -> None:
    result = _decode({field: value})
    assert result.fatal == [(f"extenders[0].{field}", message)]
    go_type = _EXTENDER.fields[field].type
    # Go allocates a pointer before it finds the JSON type wrong: the struct it points to stays zero.
    left = godecode.zero(go_type.elem if isinstance(go_type, godecode.Pointer) else go_type)
    assert result.value["extenders"][0][field] == left


def test_unknown_and_repeated_fields_are_strict_errors_by_path() -> None:
    result = godecode.decode(
        Pairs([("extenders", [Pairs([("weight", Number("1")), ("weight", Number("2")), ("Weight", Number("3"))])])]),
        _TOP,
    )
    assert result.strict == ['duplicate field "extenders[0].weight"', 'unknown field "extenders[0].Weight"']
    assert result.value["extenders"][0]["weight"] == 2


def test_embedded_structs_are_named_in_errors_when_go_names_them() -> None:
    top = godecode.Struct(
        "Config", "v1.Config", {"enableProfiling": godecode.Field(godecode.BOOL, "DebuggingConfiguration")}
    )
    old = godecode.decode({"enableProfiling": "yes"}, top).fatal[0][1]
    new = godecode.decode({"enableProfiling": "yes"}, top, embedded_names=True).fatal[0][1]
    assert "Go struct field Config.enableProfiling of type bool" in old
    assert "Go struct field Config.DebuggingConfiguration.enableProfiling of type bool" in new


# --- Go's base64, durations and PEM -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "offset"),
    [("-----BEGIN", 0), ("QUJD RA==", 4), ("QUJDRA", 4), ("QUJ", 0), ("QU\nJD!", 5), ("QQ==x", 4), ("Q===", 1)],
)
def test_bad_base64_names_the_byte_like_go(data: str, offset: int) -> None:
    with pytest.raises(Base64Error, match=f"^illegal base64 data at input byte {offset}$"):
        decode_std(data)


def test_base64_skips_line_breaks_as_wrapping_tools_write_them() -> None:
    data = bytes(range(256)) * 3
    assert decode_std(base64.encodebytes(data).decode()) == data


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("5s", 5 * 10**9),
        ("1500ms", 15 * 10**8),
        ("1m30.5s", 905 * 10**8),
        (".5s", 5 * 10**8),
        ("1h", 3600 * 10**9),
        ("2us", 2000),
        ("2µs", 2000),
        ("0", 0),
        ("-1.5s", -15 * 10**8),
        ("+3s", 3 * 10**9),
        ("1.s", 10**9),
    ],
)
def test_go_durations(text: str, nanoseconds: int) -> None:
    assert parse_duration(text) == nanoseconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5", 'time: missing unit in duration "5"'),
        ("5sec", 'time: unknown unit "sec" in duration "5sec"'),
        ("5S", 'time: unknown unit "S" in duration "5S"'),
        ("", 'time: invalid duration ""'),
        (".s", 'time: invalid duration ".s"'),
        ("--5s", 'time: invalid duration "--5s"'),
        ("3000000h", 'time: invalid duration "3000000h"'),
    ],
)
def test_invalid_go_durations(text: str, message: str) -> None:
    with pytest.raises(DurationError, match=f"^{message}$"):
        parse_duration(text)


def test_pem_blocks_are_found_as_go_finds_them() -> None:
    body = base64.encodebytes(b"certificate bytes").decode()
    good = f"-----BEGIN CERTIFICATE-----\n{body}-----END CERTIFICATE-----\n"
    corrupt = "-----BEGIN KEY-----\nnot base64!\n-----END KEY-----\n"
    mismatched = "-----BEGIN X-----\nQQ==\n-----END Y-----\n"
    text = f"junk before\n{good}{corrupt}{mismatched}{good}"
    blocks = gopem.blocks(text.encode())
    assert [(block.type, block.bytes) for block in blocks] == [("CERTIFICATE", b"certificate bytes")] * 2
    headers = f"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\n{body}-----END RSA PRIVATE KEY-----\n"
    assert gopem.blocks(headers.encode())[0].headers == {"Proc-Type": "4,ENCRYPTED"}
