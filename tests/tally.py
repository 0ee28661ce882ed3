"""Requests sent per suite (or kind) and answer status: what the hostile suites report at the end."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest


class Tally:
    """Requests sent per suite and answer status: the counts the fuzzing is reported by."""

    def __init__(self, title: str = "hostile input") -> None:
        self.title = title
        # Status "none": the connection ended without an answer (a client that aborted its own request).
        self.by_suite: defaultdict[str, Counter[int | str]] = defaultdict(Counter)

    def add(self, suite: str, status: int | str) -> None:
        self.by_suite[suite][status] += 1

    def report(self) -> list[str]:
        total = sum(sum(counts.values()) for counts in self.by_suite.values())
        statuses = [(status, n) for counts in self.by_suite.values() for status, n in counts.items()]
        errors = sum(n for status, n in statuses if isinstance(status, int) and status >= 500 and status != 501)
        unknown_coding = sum(n for status, n in statuses if status == 501)
        aside = f" (and {unknown_coding} the standard 501 to an unknown transfer coding)" if unknown_coding else ""
        lines = [f"{self.title}: {total} requests, {errors} answered 5xx{aside}"]
        for suite, counts in self.by_suite.items():
            ordered = sorted(counts.items(), key=lambda item: str(item[0]))
            statuses = ", ".join(f"{status}: {n}" for status, n in ordered)
            lines.append(f"  {suite}: {sum(counts.values())} ({statuses})")
        return lines

    def print_report(self, request: pytest.FixtureRequest) -> None:
        """The report on the terminal even when output is captured, so that CI logs show the counts."""
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line("")
                for line in self.report():
                    reporter.write_line(line)
