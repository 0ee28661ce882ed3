"""Cloud Functions entry point ``extender``; the logic lives in the ``extender`` package.

The policy is loaded and validated here, when the instance starts: a broken
policy stops the deployment instead of failing scheduling requests later.
"""

import functions_framework
from flask import Request, Response

from extender.app import Extender
from extender.logs import setup_logging

setup_logging()
_extender = Extender.from_environment()


@functions_framework.http
def extender(request: Request) -> Response:
    return _extender.handle(request)
