"""The echo floor: the least a correct extender served by functions-framework must do, and nothing more.

It reads the body as the extender does, finds each node's bytes with
msgspec without decoding them, and answers what kube-scheduler accepts from
an extender that keeps every node and has no preference: filter echoes the
node objects (or the node names) spliced back byte-for-byte, prioritize
gives each node name a zero score. No validation, no limits, no plugins, no
log line: every step it takes, any extender answering in these modes takes
too, so the distance to it is what the extender's own work costs.
"""

from __future__ import annotations

import functions_framework
import msgspec
from flask import Request, Response

# As the extender reads a body: pieces of the size gunicorn receives at a time.
_PIECE = 1 << 20


class _Metadata(msgspec.Struct):
    name: msgspec.Raw = msgspec.Raw(b'""')


class _Named(msgspec.Struct):
    metadata: _Metadata = msgspec.field(default_factory=_Metadata)


class _EchoList(msgspec.Struct):
    items: list[msgspec.Raw] = []


class _NamedList(msgspec.Struct):
    items: list[_Named] = []


class _EchoArgs(msgspec.Struct):
    Nodes: _EchoList | None = None
    NodeNames: msgspec.Raw = msgspec.Raw(b"[]")


class _ScoreArgs(msgspec.Struct):
    Nodes: _NamedList | None = None
    NodeNames: list[msgspec.Raw] | None = None


_echo_args = msgspec.json.Decoder(_EchoArgs).decode
_score_args = msgspec.json.Decoder(_ScoreArgs).decode
_PASSED = b'"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}'


def _filter(body: bytes) -> bytes:
    args = _echo_args(body)
    if args.Nodes is not None:
        return b'{"Nodes":{"metadata":{},"items":[%b]},"NodeNames":null,%b' % (b",".join(args.Nodes.items), _PASSED)
    return b'{"Nodes":null,"NodeNames":%b,%b' % (args.NodeNames, _PASSED)


def _prioritize(body: bytes) -> bytes:
    args = _score_args(body)
    names = [node.metadata.name for node in args.Nodes.items] if args.Nodes is not None else args.NodeNames or []
    if not names:
        return b"[]"
    return b'[{"Host":%b,"Score":0}]' % b',"Score":0},{"Host":'.join(names)


@functions_framework.http
def extender(request: Request) -> Response:
    body = bytearray()
    while piece := request.stream.read(_PIECE):
        body += piece
    answer = _prioritize(body) if request.path.endswith("/prioritize") else _filter(body)
    return Response(answer, mimetype="application/json")
