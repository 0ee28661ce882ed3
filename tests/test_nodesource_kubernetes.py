"""The kubernetes node source against a real HTTPS API server: cache, refresh, rate limit, failures, time budget."""

from __future__ import annotations

import json
import logging
import os
import time

import pytest

from extender.framework.kept import KeptProfile
from extender.framework.profile import Profile, ScorePluginEntry
from extender.framework.status import Code
from extender.framework.types import Node, Pod
from extender.kube import client_from_settings
from extender.nodesource.kubernetes import KubernetesNodes, KubernetesSettings
from extender.plugins.nodelabelpolicy import NodeLabelPolicy
from extender.plugins.topologypreference import TopologyPreference
from extender.settings import Settings
from testkit.fake_apiserver import node, wait_for
from testkit.ports import free_port
from tests.plugin_helpers import build

POD = Pod(uid="u1", name="web-1", namespace="default", labels={}, annotations={})
CLUSTER = [node("node-a", {"zone": "a"}), node("node-b", {"zone": "b"}), node("node-c", {"zone": "a"})]


class Clock:
    """Time that moves only when a test says so: TTL and rate limits without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def source(
    env: dict[str, str], clock: Clock | None = None, fail_open: bool = False, **settings: float
) -> KubernetesNodes:
    kube = client_from_settings(Settings.from_environment(env))
    assert kube is not None
    made = KubernetesNodes(kube, KubernetesSettings(**settings), fail_open, clock or Clock())
    return made


def started(apiserver, **kwargs) -> KubernetesNodes:
    made = source(apiserver.environment(), **kwargs)
    first = made.start()
    assert first is not None
    first.result(timeout=5)
    return made


def zone_a_only(fail_open: bool = False) -> Profile:
    rule = {"rules": [{"name": "zone-a", "nodeSelector": {"matchLabels": {"zone": "a"}}}]}
    return Profile("p", filters=[build(NodeLabelPolicy, rule)], fail_open=fail_open)


def prefer_zone_b() -> Profile:
    preference = {"preferences": [{"label": "zone", "weights": {"b": 100, "a": 50}}]}
    return Profile("p", scores=[ScorePluginEntry(build(TopologyPreference, preference), 1)])


def node_lists(apiserver) -> int:
    return apiserver.count("GET", "/api/v1/nodes")


def test_warm_cache_answers_without_calling_the_api(apiserver):
    apiserver.set_nodes(CLUSTER)
    nodes = started(apiserver)
    for _ in range(3):
        found = nodes.lookup(["node-c", "node-a"])
        assert found == [Node("node-c", {"zone": "a"}), Node("node-a", {"zone": "a"})]
    assert node_lists(apiserver) == 1


def test_an_expired_cache_answers_at_once_and_refreshes_in_the_background(apiserver):
    apiserver.set_nodes(CLUSTER)
    clock = Clock()
    nodes = started(apiserver, clock=clock, cache_ttl=30.0)
    apiserver.set_nodes([node("node-a", {"zone": "b"})])
    clock.now += 29
    assert nodes.lookup(["node-a"])[0].labels == {"zone": "a"}
    assert node_lists(apiserver) == 1
    clock.now += 2
    assert nodes.lookup(["node-a"])[0].labels == {"zone": "a"}  # stale, while revalidating
    assert wait_for(lambda: nodes.lookup(["node-a"])[0].labels == {"zone": "b"})
    assert node_lists(apiserver) == 2


def test_a_refresh_keeps_the_node_objects_whose_labels_did_not_change(apiserver):
    """What plugins worked out per Node object stays valid: only the changed node is worked out again."""
    apiserver.set_nodes(CLUSTER)
    clock = Clock()
    nodes = started(apiserver, clock=clock, cache_ttl=30.0)
    profile = KeptProfile(zone_a_only())
    before = nodes.lookup(["node-a", "node-b", "node-c"])
    assert profile.filter_names(POD, ["node-a", "node-b", "node-c"], nodes).feasible == ["node-a", "node-c"]
    apiserver.set_nodes([node("node-a", {"zone": "a"}), node("node-b", {"zone": "a"}), node("node-c", {"zone": "a"})])
    clock.now += 31
    nodes.lookup(["node-a"])  # expired: refreshes in the background
    assert wait_for(lambda: nodes.lookup(["node-b"])[0].labels == {"zone": "a"})
    after = nodes.lookup(["node-a", "node-b", "node-c"])
    assert after[0] is before[0] and after[2] is before[2] and after[1] is not before[1]
    result = profile.filter_names(POD, ["node-a", "node-b", "node-c"], nodes)
    assert result.feasible == ["node-a", "node-b", "node-c"]


def test_an_unknown_name_refetches_at_once(apiserver):
    apiserver.set_nodes(CLUSTER)
    clock = Clock()
    nodes = started(apiserver, clock=clock)
    apiserver.add_node(node("node-d", {"zone": "b"}))
    clock.now += 10  # past minRefreshInterval, well within cacheTTL
    assert nodes.lookup(["node-a", "node-d"]) == [Node("node-a", {"zone": "a"}), Node("node-d", {"zone": "b"})]
    assert node_lists(apiserver) == 2


def test_made_up_names_cannot_hammer_the_api_server(apiserver):
    apiserver.set_nodes(CLUSTER)
    clock = Clock()
    nodes = started(apiserver, clock=clock, min_refresh_interval=5.0)
    clock.now += 5
    for index in range(50):
        [bogus] = nodes.lookup([f"bogus-{index}"])
        assert bogus.labels is None and bogus.why_unknown is not None
        assert bogus.why_unknown.code is Code.ERROR  # facts missing: each plugin's failurePolicy decides
        clock.now += 0.01
    assert node_lists(apiserver) == 2  # the first list and one refetch in the 5 s window
    clock.now += 5
    nodes.lookup(["bogus-again"])
    assert node_lists(apiserver) == 3


def test_a_node_that_just_joined_follows_the_failure_policy_and_is_never_unresolvable(apiserver):
    """Within minRefreshInterval of the last list, a node the API already lists used to be rejected as
    UnschedulableAndUnresolvable ("not in the Kubernetes API's node list (listed 0 s ago)") whatever the policy: the
    scheduler then never retried nor preempted there. Its facts are missing, no more."""
    apiserver.set_nodes(CLUSTER)
    clock = Clock()
    nodes = started(apiserver, clock=clock, min_refresh_interval=5.0)
    apiserver.add_node(node("node-d", {"zone": "a"}))
    clock.now += 0.4
    [joined] = nodes.lookup(["node-d"])
    assert joined.why_unknown.code is Code.ERROR
    assert joined.why_unknown.reason == "node node-d is not in the node list fetched 0.4 s ago from the Kubernetes API"
    assert node_lists(apiserver) == 1  # the rate limit holds
    failed = zone_a_only().filter(POD, nodes.lookup(["node-a", "node-b", "node-d"]))
    assert failed.feasible == ["node-a"] and failed.error is None
    assert failed.rejected["node-b"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # listed: its zone is wrong
    assert failed.rejected["node-d"].code is Code.UNSCHEDULABLE  # FailedNodes: the scheduler may retry, preempt
    assert "failurePolicy Fail" in failed.rejected["node-d"].reason
    assert "not in the node list fetched 0.4 s ago" in failed.rejected["node-d"].reason
    assert list(failed.skipped) == ["node-d"]
    ignored = zone_a_only(fail_open=True).filter(POD, nodes.lookup(["node-a", "node-d"]))
    assert ignored.feasible == ["node-a", "node-d"] and "failurePolicy Ignore" in ignored.skipped["node-d"][0].reason
    clock.now += 5  # past minRefreshInterval: the unknown name lists again, and the node is judged
    assert zone_a_only().filter(POD, nodes.lookup(["node-a", "node-d"])).feasible == ["node-a", "node-d"]


def test_a_node_a_fresh_list_lacks_is_still_only_missing_facts(apiserver):
    """The scheduler named the node from its own cache: a list without it lags (or leads) the scheduler's."""
    apiserver.set_nodes(CLUSTER)
    clock = Clock()
    nodes = started(apiserver, clock=clock)
    clock.now += 10
    [gone] = nodes.lookup(["node-gone"])
    assert node_lists(apiserver) == 2
    assert (
        gone.why_unknown.code is Code.ERROR
        and "node node-gone is not in the node list fetched" in gone.why_unknown.reason
    )


def test_a_node_the_api_does_not_list_scores_lowest_without_failing_the_others(apiserver):
    apiserver.set_nodes(CLUSTER)
    nodes = started(apiserver)
    result = prefer_zone_b().prioritize(POD, nodes.lookup(["node-a", "node-gone", "node-b"]))
    assert result.error is None
    assert result.scores == {"node-a": 5, "node-gone": 0, "node-b": 10}


@pytest.mark.parametrize("fail_open", [False, True], ids=["Fail", "Ignore"])
def test_api_down_follows_the_failure_policy_and_logs_the_decision(caplog, fail_open):
    env = {"KUBERNETES_API_URL": f"https://127.0.0.1:{free_port()}", "KUBERNETES_TOKEN": "t"}
    nodes = source(env, fail_open=fail_open)
    with caplog.at_level(logging.WARNING, logger="extender"):
        found = nodes.lookup(["node-a", "node-b"])
    assert all(node.labels is None and node.why_unknown.code is Code.ERROR for node in found)
    result = zone_a_only(fail_open).filter(POD, found)
    if fail_open:
        assert result.feasible == ["node-a", "node-b"] and result.error is None
        assert all("failurePolicy Ignore" in result.skipped[name][0].reason for name in ("node-a", "node-b"))
    else:  # not one node could be judged
        assert result.error is not None and result.feasible == []
        assert "cannot reach the Kubernetes API" in result.error.reason
    # The failed list: a WARNING the source_failures metric counts, by its source.
    [listing] = [record.json_fields for record in caplog.records if "source" in getattr(record, "json_fields", {})]
    assert (listing["event"], listing["source"]) == ("extender.nodesource", "kubernetes")
    assert listing["outcome"] == "no list yet"
    assert listing["problem"].startswith("listing nodes failed: cannot reach the Kubernetes API")
    decision = next(record.getMessage() for record in caplog.records if "failurePolicy" in record.getMessage())
    default = "Ignore" if fail_open else "Fail"
    assert decision.startswith(
        "node labels unavailable for node-a, node-b: node facts unavailable: listing nodes failed: cannot reach"
    )
    assert decision.endswith(
        f"each plugin's failurePolicy decides (policy default {default}): Fail rejects these nodes, Ignore lets them "
        "pass"
    )


def test_api_down_after_a_list_keeps_serving_the_cache(apiserver):
    apiserver.set_nodes(CLUSTER)
    clock = Clock()
    nodes = started(apiserver, clock=clock)
    apiserver.stop()
    clock.now += 60
    assert nodes.lookup(["node-a"]) == [Node("node-a", {"zone": "a"})]  # starts a refresh that fails
    assert wait_for(lambda: nodes.lookup(["node-new"])[0].why_unknown.code is Code.ERROR)
    [new] = nodes.lookup(["node-new"])
    assert "listing nodes failed: cannot reach the Kubernetes API" in new.why_unknown.reason
    assert nodes.lookup(["node-b"]) == [Node("node-b", {"zone": "b"})]


def test_a_slow_api_costs_a_request_at_most_max_wait(apiserver):
    apiserver.set_nodes(CLUSTER)
    apiserver.delay = 3.0
    nodes = source(apiserver.environment(), max_wait=0.3)
    began = time.monotonic()
    found = nodes.lookup(["node-a"])
    assert time.monotonic() - began < 1.0
    assert found[0].why_unknown.code is Code.ERROR
    assert found[0].why_unknown.reason == "the Kubernetes API did not list the nodes within 0.3 s (nodeSource maxWait)"


def test_max_wait_never_exceeds_the_clients_call_budget(apiserver):
    apiserver.delay = 3.0
    nodes = source(apiserver.environment() | {"EXTENDER_HTTP_TIMEOUT": "400ms"}, max_wait=5.0)
    began = time.monotonic()
    nodes.lookup(["node-a"])
    assert time.monotonic() - began < 1.0


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ({"KUBERNETES_TOKEN": "expired"}, "401 Unauthorized: Unauthorized (check KUBERNETES_TOKEN"),
        (None, 'cannot list resource "nodes" in API group "" at the cluster scope (grant the extender the RBAC'),
    ],
    ids=["401", "403"],
)
def test_refused_credentials_fail_closed_with_the_api_servers_message(apiserver, breakage, expected):
    apiserver.set_nodes(CLUSTER)
    if breakage is None:
        apiserver.forbidden.add(("list", "nodes"))
    nodes = source(apiserver.environment() | (breakage or {}))
    result = zone_a_only().filter(POD, nodes.lookup(["node-a"]))
    assert result.error is not None and expected in result.error.reason


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_worker_lists_on_its_own(apiserver):
    """functions-framework builds the function in gunicorn's master, then forks the worker mid-list perhaps."""
    apiserver.set_nodes(CLUSTER)
    clock = Clock()
    nodes = started(apiserver, clock=clock)
    apiserver.delay = 2.0
    clock.now += 60
    nodes.lookup(["node-a"])  # a background list, still waiting for the API server when the process forks
    assert wait_for(lambda: node_lists(apiserver) == 2)
    apiserver.delay = 0.0
    apiserver.add_node(node("node-d", {"zone": "b"}))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: the parent's list thread does not exist here
        labels = nodes.lookup(["node-d"])[0].labels
        os.write(write, json.dumps(labels).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        assert json.loads(answer.read()) == {"zone": "b"}
    assert os.waitpid(pid, 0)[1] == 0
