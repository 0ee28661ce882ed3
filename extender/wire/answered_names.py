"""The node names this instance's filter answered, kept for the prioritize request that follows.

kube-scheduler asks prioritize about exactly the nodes its extenders' filters kept, named in the order the last
filter answered them (``HTTPExtender.Filter`` maps the answer's ``NodeNames`` back in order, ``Prioritize`` names
those nodes), and writes ``NodeNames`` last in the body. So a node-name prioritize body usually ends with bytes this
instance encoded a moment before, and decoding them would build thousands of strings equal to the answer's.
``extender.wire.decode`` decodes only the rest of such a body and takes the names from here.

Invariant: each kept list is a copy nobody changes, kept with ``orjson.dumps`` of it, and handed out as a new copy;
bytes equal to that encoding decode to a list equal to it (orjson encodes a string so that it decodes to the same
string). Its names are part of its filter request's names, which that request's schema checked distinct and non-empty,
so they are handed out as ``BuiltNames`` known distinct, and the prioritize's schema does not check them again
(``extender.wire.schemas``). Bounded: the ``MAX_ANSWERS`` newest answers not yet taken, replaced in one assignment
(concurrent requests at worst miss an answer, whose prioritize is then decoded whole, or take one twice). Off with
``EXTENDER_RESULT_CACHE=off`` and with ``EXTENDER_DECODER=full`` (``Extender`` then keeps none).
"""

from __future__ import annotations

import orjson

from extender.wire.fields import BuiltNames

# kube-scheduler sends a pod's prioritize right after its filter, one pod at a time; a second answer covers another
# scheduler's filter in between. Each holds at most ``limits.MAX_NODES`` names. Few, as an answer never taken (its
# prioritize went to another instance) is freed when a newer one pushes it out, its strings out of every cache.
MAX_ANSWERS = 2
# The last member of kube-scheduler's prioritize body (``ExtenderArgs``, compact JSON), up to its value.
LAST_MEMBER = b',"NodeNames":'


class AnsweredNames:
    __slots__ = ("_answers", "_prioritizing")

    def __init__(self) -> None:
        # The newest first: each list's encoding, and the list.
        self._answers: tuple[tuple[bytes, list[str]], ...] = ()
        # Whether a node-name prioritize body came: a scheduler without ``prioritizeVerb`` never sends one.
        self._prioritizing = False

    def remember(self, names: list[str]) -> None:
        """Keep a filter answer's ``NodeNames`` (part of its request's checked names), once a node-name prioritize
        came: where none comes, filter pays nothing for it."""
        if not self._prioritizing:
            return
        try:
            encoded = orjson.dumps(names)
        except orjson.JSONEncodeError:  # a name orjson cannot encode (a lone surrogate) cannot come back as these bytes
            return
        self._answers = ((encoded, list(names)), *self._answers[: MAX_ANSWERS - 1])

    def take(self, body: bytes | bytearray) -> tuple[int, BuiltNames] | None:
        """Where ``body``'s last member begins (``LAST_MEMBER``, its comma), with a copy of the names its value
        encodes: when the body ends with that member, a kept answer's bytes as its value, and the closing brace.
        That answer is then dropped: its prioritize came, and its names go with that request, as decoded ones do."""
        if not body.endswith(b"]}"):
            return None
        self._prioritizing = True
        end = len(body) - 1
        answers = self._answers
        for answer in answers:
            encoded, names = answer
            start = end - len(encoded) - len(LAST_MEMBER)
            if start > 0 and body.startswith(LAST_MEMBER, start) and body.startswith(encoded, end - len(encoded)):
                self._answers = tuple(other for other in answers if other is not answer)
                return start, BuiltNames(names, distinct=True)
        return None
