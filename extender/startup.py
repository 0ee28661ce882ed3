"""Start an instance: build the extender from the environment, with the process tuned for serving.

Start-up builds objects the instance keeps for its whole life (modules, the
policy, with the kubernetes node source a list of every node's labels): the
garbage collector would walk them again and again as they pile up, finding
nothing. So the collector is paused while they are built and they are frozen
afterwards: later collections skip them, and gunicorn's forked worker does not
copy their pages as the collector touches them. glibc's malloc thresholds are
held for the requests (``extender.http.memory``) from the first answer on: loading
ctypes to set them would delay that answer (``extender.http.after_answer``), and
the first request runs under glibc's own thresholds.

Both change the whole process, so ``start`` applies them only with
``EXTENDER_PROCESS_TUNING`` on (``extender.settings``; the default; the tests' in-process apps turn
it off), and a failed start-up (``SystemExit``) leaves the process as it was.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from extender.http.handler import Extender


def start(environ: Mapping[str, str] | None = None) -> Extender:
    """The extender the function serves; SystemExit with the problems, one per line, when it cannot start."""
    from extender.errors import ConfigError
    from extender.settings import Settings

    try:
        settings = Settings.from_environment(environ)
    except ConfigError as exc:
        raise SystemExit(f"extender cannot start: {exc}") from None
    collecting = gc.isenabled()
    if settings.process_tuning:
        gc.disable()
    try:
        from extender.http.after_answer import after_first_answer
        from extender.http.handler import Extender
        from extender.http.memory import hold_malloc_thresholds
        from extender.logs import setup_logging
        from extender.policy.loader import PolicyError

        setup_logging(settings=settings)
        try:
            extender = Extender.from_environment(settings=settings)
        except (PolicyError, ConfigError) as exc:
            # Without a traceback: this is what the deployment's log shows.
            raise SystemExit(f"extender cannot start: {exc}") from None
        if settings.process_tuning:
            # For the requests, not for start-up: the node list's buffers come faster from the heap.
            after_first_answer(hold_malloc_thresholds)
            gc.freeze()
        return extender
    finally:
        if collecting:
            gc.enable()
