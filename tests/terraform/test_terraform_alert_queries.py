"""The latency alerts' PromQL, as Terraform renders it, evaluated by Prometheus's own rule tester (promtool).

Cloud Monitoring evaluates the alert policies' PromQL; the same expressions run here on synthetic series named as
Cloud Monitoring names the function's latency metric and Cloud Run's: a busy verb whose p99 is above the threshold
fires, and neither one slow call in sparse traffic nor a busy verb of fast calls does. The queries come from
monitoring.tf's own locals, rendered by terraform (the threshold, which derives from the scheduler configuration
module, is fixed to 4000 ms: 80% of the default 5 s httpTimeout).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.prometheus import promtool_test_rules
from tests.terraform.support import monitoring_locals

QUERIES = ["latency_query", "cloud_run_latency_query"]
LOCALS = ["promql_window", "promql_latency", "promql_function", "promql_cloud_run", *QUERIES]
THRESHOLD_MS = 4000
MIN_REQUESTS = 100
FUNCTION = "scheduler-extender"
FUNCTION_SERIES = (
    'logging_googleapis_com:user_scheduler_extender_latency{monitored_resource="cloud_run_revision",verb="filter"}'
)
CLOUD_RUN_SERIES = (
    'run_googleapis_com:request_latencies{monitored_resource="cloud_run_revision",service_name="scheduler-extender",'
    'response_code="200"}'
)


@pytest.fixture(scope="module")
def queries(terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """monitoring.tf's latency queries for the default function name, window (5 min) and minimum of calls."""
    directory = tmp_path_factory.mktemp("alert-queries") / "module"
    prelude = f"  latency_threshold_ms = {THRESHOLD_MS}\n"
    rendered = monitoring_locals(terraform, terraform_env, directory, LOCALS, prelude)
    return {name: rendered[name] for name in QUERIES}


def _histogram(series: str, fast: list[int], slow: list[int]) -> list[dict[str, str]]:
    """Counter series of a histogram from the calls of each minute: fast ones under 1 s, slow ones 4.5 to 10 s."""
    totals = {"1000": fast, "4500": fast, "10000": [a + b for a, b in zip(fast, slow, strict=True)]}
    totals["+Inf"] = totals["10000"]
    rows = {f'_bucket{{le="{le}",': counts for le, counts in totals.items()}
    rows["_count{"] = totals["+Inf"]
    return [
        {
            "series": series.replace("{", suffix, 1),
            "values": " ".join(str(sum(counts[:minute])) for minute in range(len(counts) + 1)),
        }
        for suffix, counts in rows.items()
    ]


MINUTES = 30
CASES = {
    # 30 calls a minute, one of them slow: p99 in the slow bucket, over 150 calls a window.
    "busy_and_slow": ([29] * MINUTES, [1] * MINUTES, True),
    "busy_and_fast": ([30] * MINUTES, [0] * MINUTES, False),
    # A call a minute and a slow one every third minute: every window's p99 is a slow call, over a handful of calls.
    "sparse_with_a_slow_call_in_every_window": (
        [1] * MINUTES,
        [int(minute % 3 == 0) for minute in range(MINUTES)],
        False,
    ),
    # Every call slow, but fewer than the minimum: the timeouts alert (cloud_run_failed) covers what fails.
    "sparse_and_all_slow": ([0] * MINUTES, [10] * MINUTES, False),
}


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_latency_alert_fires_only_for_many_slow_calls(
    queries: dict[str, str], tmp_path: Path, query: str, case: str
) -> None:
    series_template = CLOUD_RUN_SERIES if query == "cloud_run_latency_query" else FUNCTION_SERIES
    fast, slow, fires = CASES[case]
    labels = {} if query == "cloud_run_latency_query" else {"verb": "filter"}
    rules = {"groups": [{"name": "extender", "rules": [{"alert": "Latency", "expr": queries[query], "for": "5m"}]}]}
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": _histogram(series_template, fast, slow),
            "alert_rule_test": [{
                "eval_time": "25m",
                "alertname": "Latency",
                "exp_alerts": [{"exp_labels": labels}] if fires else [],
            }],
        }],
    }
    failed = promtool_test_rules(tmp_path, tests, rules)
    assert not failed, f"{queries[query]}\n{failed}"


def test_queries_name_the_metrics_as_cloud_monitoring_does(queries: dict[str, str]) -> None:
    assert "logging_googleapis_com:user_scheduler_extender_latency_bucket{" in queries["latency_query"]
    assert f'service_name="{FUNCTION}"' in queries["cloud_run_latency_query"]
    for query in queries.values():
        assert f"> {THRESHOLD_MS}" in query and f">= {MIN_REQUESTS}" in query and "[5m]" in query
