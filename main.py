"""Cloud Functions entry point ``extender``; the logic lives in the ``extender`` package.

The policy and settings are loaded and validated here, when the instance
starts: a broken policy stops the deployment, listing its problems, instead
of failing scheduling requests later.
"""

import functions_framework
from flask import Request, Response

from extender.app import Extender
from extender.errors import ConfigError
from extender.logs import setup_logging
from extender.policy.loader import PolicyError

setup_logging()
try:
    _extender = Extender.from_environment()
except (PolicyError, ConfigError) as exc:
    # The problems, one per line, without a traceback: this is what the deployment's log shows.
    raise SystemExit(f"extender cannot start: {exc}") from None


@functions_framework.http
def extender(request: Request) -> Response:
    return _extender.handle(request)
