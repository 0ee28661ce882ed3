"""Cloud Functions entry point ``extender``; the logic lives in the ``extender`` package.

The policy and settings are loaded and validated here, when the instance
starts: a broken policy stops the deployment, listing its problems, instead
of failing scheduling requests later.
"""

import gc

# Start-up builds objects the instance keeps for its whole life (modules, the policy, with the kubernetes node
# source a list of every node's labels): the collector would walk them again and again as they pile up, finding
# nothing (~60 ms of a 5000-node start-up). Frozen once built, later collections skip them, and gunicorn's forked
# worker does not copy them page by page as the collector touches them.
gc.disable()

import functions_framework
from flask import Request, Response

from extender.app import Extender
from extender.errors import ConfigError
from extender.logs import setup_logging
from extender.memory import hold_malloc_thresholds
from extender.policy.loader import PolicyError

setup_logging()
try:
    _extender = Extender.from_environment()
except (PolicyError, ConfigError) as exc:
    # The problems, one per line, without a traceback: this is what the deployment's log shows.
    raise SystemExit(f"extender cannot start: {exc}") from None
# For the requests, not for start-up: the node list's buffers come faster from the heap. gunicorn's worker inherits it.
hold_malloc_thresholds()
gc.freeze()
gc.enable()


@functions_framework.http
def extender(request: Request) -> Response:
    return _extender.handle(request)
