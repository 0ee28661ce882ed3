"""The switches of the extender's own mechanisms, read from the environment in one place.

    EXTENDER_RESULT_CACHE    on (default) | off   results kept across requests (extender.framework.kept)
    EXTENDER_DECODER         fast (default) | full  full-node bodies decoded in part, or all by the full decoder
    EXTENDER_PROCESS_TUNING  on (default) | off   collector and allocator tuned at start-up (extender.startup)

Each is a fixed set of words; anything else is a ConfigError naming the variable, which stops start-up.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from extender.errors import ConfigError

RESULT_CACHE_ENV = "EXTENDER_RESULT_CACHE"
DECODER_ENV = "EXTENDER_DECODER"
TUNING_ENV = "EXTENDER_PROCESS_TUNING"


class Settings(NamedTuple):
    result_cache: bool = True
    full_decoder: bool = False
    process_tuning: bool = True

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        return cls(
            result_cache=_choice(environ, RESULT_CACHE_ENV, {"on": True, "off": False}, "on"),
            full_decoder=_choice(environ, DECODER_ENV, {"fast": False, "full": True}, "fast"),
            process_tuning=_choice(environ, TUNING_ENV, {"on": True, "off": False}, "on"),
        )


def _choice(environ: Mapping[str, str], name: str, words: Mapping[str, bool], default: str) -> bool:
    raw = environ.get(name, "")
    word = raw.strip().lower() or default
    if word not in words:
        raise ConfigError(f"{name} must be {' or '.join(words)}, got {raw!r}")
    return words[word]
