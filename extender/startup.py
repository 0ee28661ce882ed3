"""Start an instance: build the extender from the environment, with the process tuned for serving.

Start-up builds objects the instance keeps for its whole life (modules, the
policy, with the kubernetes node source a list of every node's labels): the
garbage collector would walk them again and again as they pile up, finding
nothing. So the collector is paused while they are built and they are frozen
afterwards: later collections skip them, and gunicorn's forked worker does not
copy their pages as the collector touches them. glibc's malloc thresholds and
its number of heaps are held (``extender.http.memory``) before gunicorn forks
the worker, so that no serving thread makes a heap of its own.

Both change the whole process, so ``start`` applies them only with
``EXTENDER_PROCESS_TUNING`` on (``extender.settings``; the default; the tests' in-process apps turn
it off), and a failed start-up (``SystemExit``) leaves the process as it was.

Two defences are set up whatever that setting says, once logging is: the
caller token's redaction from every served logger
(``extender.http.token_redaction``), and the server functions-framework will
build once main.py is loaded (``extender.http.server``).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from extender.http.handler import Extender


def start(environ: Mapping[str, str] | None = None) -> Extender:
    """The extender the function serves; SystemExit with the problems, one per line, when it cannot start."""
    from extender.errors import ConfigError
    from extender.settings import ALLOCATOR_ENVIRONMENT, Settings

    try:
        settings = Settings.from_environment(environ)
    except ConfigError as exc:
        raise SystemExit(f"extender cannot start: {exc}") from None
    collecting = gc.isenabled()
    if settings.process_tuning:
        gc.disable()
    try:
        from extender.http.handler import Extender
        from extender.http.memory import hold_malloc_thresholds
        from extender.http.server import install
        from extender.http.token_redaction import redact_tokens_in_logs
        from extender.logs import setup_logging
        from extender.policy.loader import PolicyError

        setup_logging(settings=settings)
        redact_tokens_in_logs(settings.caller_tokens)
        install()
        try:
            extender = Extender.from_environment(settings=settings)
        except (PolicyError, ConfigError) as exc:
            # Without a traceback: this is what the deployment's log shows.
            raise SystemExit(f"extender cannot start: {exc}") from None
        from extender.policy.loader import plugin_notes

        for name, profile in sorted(extender.policy.profiles.items()):
            for note in plugin_notes(profile):
                logging.getLogger("extender").warning("profile %s: %s", name, note)
        if settings.process_tuning:
            # Before any thread serves: a thread that allocated first would keep a heap of its own, whose top glibc
            # never gives back (extender.http.memory).
            hold_malloc_thresholds()
            gc.freeze()
            if not settings.allocator_as_deployed:
                logging.getLogger("extender").info(
                    "the allocator is not set up as deployed (%s): the memory of large requests will come back "
                    "only in part (docs/architecture.md, extender/http/memory.py)",
                    " ".join(f"{name}={value}" for name, value in ALLOCATOR_ENVIRONMENT.items()),
                )
        return extender
    finally:
        if collecting:
            gc.enable()
