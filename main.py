"""Cloud Functions entry point ``extender``; the logic lives in the ``extender`` package.

The policy and settings are loaded and validated here, when the instance
starts (``extender.startup.start``): a broken policy stops the deployment,
listing its problems, instead of failing scheduling requests later.
"""

import functions_framework
from flask import Request, Response

from extender.startup import start

_extender = start()


@functions_framework.http
def extender(request: Request) -> Response:
    return _extender.handle(request)
