"""What YAML read where a policy needs a value of another type, said beside the problem: ``gke-spot: true`` reads as a
boolean, so ``Not a valid string.`` gets ``YAML read a boolean; quote it: 'true'``.

One rule for every field, from the policy's own text: the node at the problem's path is found in the composed
document (only once a policy has a problem), and a type error on a scalar that YAML read as another type than the
field wants says which type and how to write it; one value where a list is wanted (``days: Tue``) says the list.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from extender.wire.errors import Hint, Path

_TAG = "tag:yaml.org,2002:"
# How marshmallow's messages for a value of the wrong type begin, and the types the field takes.
_WANTED: dict[str, tuple[type, ...]] = {
    "Not a valid string": (str,),
    "Not a valid integer": (int,),
    "Not a valid number": (int, float),
    "Not a valid boolean": (bool,),
}
# marshmallow reports null itself ("Field may not be null."), whatever the field's type.
# YAML 1.1 reads an unquoted H:MM (one digit of hours) as a base-60 number; quoted, it is still no HH:MM.
_SEXAGESIMAL_CLOCK = re.compile(r"([0-9]):([0-5][0-9])")
# The longest value a hint repeats.
_SHOWN_CHARS = 200
_READ_AS = {"bool": "a boolean", "int": "a number", "float": "a number", "timestamp": "a date"}


def yaml_hint(text: str, loader: type) -> Hint:
    """A hint for ``flatten_errors`` that reads ``text`` with ``loader`` (the policy's) when first asked."""
    import yaml

    @functools.cache
    def document() -> Any:
        return yaml.compose(text, Loader=loader)

    def hint(path: Path, message: str) -> str:
        if message.startswith("Not a valid list"):
            one = _node_at(document(), path)
            if isinstance(one, yaml.ScalarNode):  # days: Tue, where a list is wanted: say the list to write
                written = text[one.start_mark.index : one.end_mark.index]
                if "\n" not in written and len(written) <= _SHOWN_CHARS:
                    return f"{message} Write it as a list: [{written}]"
            return message
        wanted = next((types for start, types in _WANTED.items() if message.startswith(start)), None)
        if wanted is None:
            return message
        node = _node_at(document(), path)
        if not isinstance(node, yaml.ScalarNode):
            return message
        kind = node.tag.removeprefix(_TAG)
        if node.style in ("'", '"'):  # a string: the field wants something else
            return f"{message} YAML read a string; write it without quotes: {node.value}" if (
                str not in wanted and type(_read(node.value, loader)) in wanted
            ) else message
        if kind not in _READ_AS:
            return message
        value = _read(node.value, loader)
        read = f"the number {value}" if kind in ("int", "float") and str(value) != node.value else _READ_AS[kind]
        if str in wanted:
            clock = _SEXAGESIMAL_CLOCK.fullmatch(node.value)
            if clock:  # 1:00 is what a person writes for a time of day: the quoted form every field takes is 01:00
                return f"{message} YAML read {read} ({node.value} in base 60); write '{int(clock[1]):02d}:{clock[2]}'"
            return f"{message} YAML read {read}; quote it: '{node.value.replace(chr(39), chr(39) * 2)}'"
        return f"{message} YAML read {read} ({node.value})" if type(value) not in wanted else message

    return hint


def _read(text: str, loader: type) -> Any:
    """What YAML reads ``text`` as, unquoted; None when it is no document of its own."""
    import yaml

    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        return None


def _node_at(root: Any, path: Path) -> Any:
    """The node the keys and indexes of ``path`` lead to, or None."""
    import yaml

    node = root
    for key in path:
        if isinstance(node, yaml.MappingNode) and isinstance(key, str):
            node = next((value for name, value in node.value if getattr(name, "value", None) == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            node = node.value[key]
        else:
            return None
    return node
