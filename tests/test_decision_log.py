"""The decision entry: one per request, with the fields log-based metrics read and the reasons operators need."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import orjson
import pytest

from extender.decision_log import EVENT, MESSAGE, NODES_PER_REASON, REJECTION_EVENT, REJECTION_MESSAGE, TOP_N
from extender.verbs import filtering
from tests.recordings import exchanges

EXCHANGES = exchanges()
FULL_FILTER = next(e for e in EXCHANGES if e.scenario == "c1-partial-reject-nodecache-false" and e.verb == "filter")
NAMES_FILTER = next(e for e in EXCHANGES if e.scenario == "c1-partial-reject-nodecache-true" and e.verb == "filter")
FULL_PREEMPT = next(e for e in EXCHANGES if e.scenario == "g-preempt-nodecache-false-echo" and e.verb == "preempt")
BIND = next(e for e in EXCHANGES if e.verb == "bind")

# Rejects node-c; scores the recorded nodes apart by zone (they carry no instance types: InstanceCost ties them).
POLICY = """
apiVersion: extender.scheduling.gcf/v1alpha1
kind: ExtenderPolicy
nodeCacheCapable: false
profiles:
- name: default
  plugins:
    filter:
      enabled: [{name: NodeNameFilter}]
    score:
      enabled: [{name: TopologyPreference, weight: 3}, {name: InstanceCost, weight: 1}]
  pluginConfig:
  - name: NodeNameFilter
    args: {deny: [node-c, "reject-*"]}
  - name: TopologyPreference
    args:
      preferences:
      - label: topology.kubernetes.io/zone
        weights: {zone-1: 100, zone-0: 40}
  - name: InstanceCost
    args: {prices: {e2-standard-4: 0.134}}
- name: names
  plugins:
    filter:
      enabled: [{name: NodeNameFilter}]
  pluginConfig:
  - name: NodeNameFilter
    args: {deny: [node-c, "reject-*"]}
"""


def write_policy(directory: Path) -> Path:
    path = directory / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture
def client(client_factory, tmp_path):
    return client_factory(write_policy(tmp_path))


def post(client, path, body):
    return client.post(path, data=body, content_type="application/json")


def decisions(caplog) -> list[logging.LogRecord]:
    found = [record for record in caplog.records if record.name == "extender.decision"]
    for record in found:
        assert record.getMessage() == MESSAGE
        assert record.json_fields["event"] == EVENT
    return found


def only_decision(caplog) -> tuple[int, dict]:
    [record] = decisions(caplog)
    # Whatever the handler, the fields must survive JSON encoding unchanged.
    assert json.loads(orjson.dumps(record.json_fields)) == record.json_fields
    return record.levelno, record.json_fields


def test_filter_entry_says_what_was_kept_and_why_the_rest_was_rejected(client, caplog):
    response = post(client, "/filter", FULL_FILTER.body)
    assert response.status_code == 200
    level, entry = only_decision(caplog)
    pod = FULL_FILTER.request["Pod"]["metadata"]
    assert level == logging.INFO
    assert entry["verb"] == "filter" and entry["profile"] == "default"
    assert entry["method"] == "POST" and entry["path"] == "/filter" and entry["status"] == 200
    assert entry["pod"] == {"namespace": pod["namespace"], "name": pod["name"], "uid": pod["uid"]}
    assert (entry["nodesIn"], entry["nodesOut"]) == (4, 3)
    assert "error" not in entry
    assert isinstance(entry["durationMs"], float) and 0 < entry["durationMs"] < entry["budgetMs"]
    assert entry["budgetMs"] == 5000
    assert entry["remainingMs"] == pytest.approx(entry["budgetMs"] - entry["durationMs"], abs=0.01)
    assert set(entry["pluginMs"]) == {"NodeNameFilter"}
    unresolvable = response.get_json()["FailedAndUnresolvableNodes"]
    assert entry["rejected"] == {
        "count": 1,
        "reasons": [
            {
                "plugin": "NodeNameFilter",
                "code": "UnschedulableAndUnresolvable",
                "reason": unresolvable["node-c"],
                "count": 1,
                "nodes": ["node-c"],
            }
        ],
        # Every plugin and rule (the reasons above are the largest groups only); NodeNameFilter's deny list is no rule.
        "rules": [{"plugin": "NodeNameFilter", "rule": "", "count": 1}],
    }
    # And each on its own, for the rejections metric.
    [rejection] = [record for record in caplog.records if record.name == "extender.rejection"]
    assert rejection.getMessage() == REJECTION_MESSAGE
    assert rejection.json_fields == {
        "event": REJECTION_EVENT, "verb": "filter", "profile": "default", "pod": entry["pod"],
        "plugin": "NodeNameFilter", "rule": "", "count": 1,
    }  # fmt: skip


def test_prioritize_entry_ranks_the_nodes_with_each_plugins_score(client, caplog):
    response = post(client, "/prioritize", FULL_FILTER.body)
    level, entry = only_decision(caplog)
    assert level == logging.INFO
    assert (entry["verb"], entry["nodesIn"], entry["nodesOut"]) == ("prioritize", 4, 4)
    answered = {item["Host"]: item["Score"] for item in response.get_json()}
    assert {item["node"]: item["score"] for item in entry["scores"]} == answered
    ranked = [item["score"] for item in entry["scores"]]
    assert ranked == sorted(ranked, reverse=True) and ranked[0] > ranked[-1]
    zone_1 = next(item for item in entry["scores"] if item["node"] == "node-b")
    assert zone_1["plugins"] == {"TopologyPreference": 100, "InstanceCost": 100}
    assert set(entry["pluginMs"]) == {"TopologyPreference", "InstanceCost"}


def test_preempt_entry_counts_accepted_candidates_and_their_victims(client, caplog):
    response = post(client, "/preempt", FULL_PREEMPT.body)
    level, entry = only_decision(caplog)
    accepted = response.get_json()["NodeNameToMetaVictims"]
    assert level == logging.INFO
    assert entry["verb"] == "preempt"
    assert entry["nodesIn"] == len(FULL_PREEMPT.request["NodeNameToVictims"])
    assert entry["nodesOut"] == entry["accepted"]["count"] == len(accepted)
    assert entry["accepted"]["victims"] == {node: len(victims["Pods"]) for node, victims in accepted.items()}
    assert entry["rejected"]["count"] == entry["nodesIn"] - entry["nodesOut"]


def test_a_plugin_error_is_an_error_entry_naming_the_plugin(client, caplog):
    # Node names only: TopologyPreference cannot know the zones, and the policy fails closed.
    response = post(client, "/prioritize", NAMES_FILTER.body)
    level, entry = only_decision(caplog)
    assert level == logging.ERROR
    assert entry["error"] == response.headers["X-Extender-Error"]
    assert entry["errorPlugin"] == "TopologyPreference"
    assert entry["status"] == 200 and entry["nodesOut"] == 0


def test_bind_entry_names_the_pod_and_the_error(client, caplog):
    post(client, "/bind", BIND.body)
    level, entry = only_decision(caplog)
    request = BIND.request
    assert level == logging.ERROR
    assert entry["pod"] == {"namespace": request["PodNamespace"], "name": request["PodName"], "uid": request["PodUID"]}
    assert "binding is not configured" in entry["error"]


@pytest.mark.parametrize(
    ("path", "body", "status", "verb"),
    [
        ("/filter", b"{", 400, "filter"),
        ("/names/filter", b'{"Pod": null}', 400, "filter"),
        ("/no-such-verb", b"{}", 404, None),
    ],
)
def test_a_rejected_request_is_a_warning_with_the_answers_error(client, caplog, path, body, status, verb):
    response = post(client, path, body)
    level, entry = only_decision(caplog)
    assert response.status_code == entry["status"] == status
    assert level == logging.WARNING
    assert entry["error"] == response.get_json()["Error"]
    assert entry["verb"] == verb and entry["pod"] is None
    assert (entry["nodesIn"], entry["nodesOut"]) == (0, 0)


def test_a_crash_is_an_error_entry_after_the_traceback(client, caplog, monkeypatch):
    def crash(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(filtering, "handle", crash)
    assert post(client, "/filter", FULL_FILTER.body).status_code == 500
    level, entry = only_decision(caplog)
    assert level == logging.ERROR
    assert entry["error"] == "internal error: RuntimeError: boom"
    assert any(record.exc_info for record in caplog.records if record.name == "extender")


@pytest.mark.parametrize(
    ("timeout", "budget_ms", "level"), [("1m30s", 90_000, logging.INFO), ("1us", 0.001, logging.WARNING)]
)
def test_the_budget_is_the_schedulers_http_timeout(client_factory, tmp_path, caplog, timeout, budget_ms, level):
    client = client_factory(write_policy(tmp_path), EXTENDER_HTTP_TIMEOUT=timeout)
    assert post(client, "/filter", FULL_FILTER.body).status_code == 200
    logged_level, entry = only_decision(caplog)
    # Over half the budget warns, though nothing failed.
    assert (logged_level, entry["budgetMs"]) == (level, budget_ms)
    assert "error" not in entry


def test_the_entry_stays_small_however_many_nodes(client, caplog):
    names = [f"{kind}-{index}" for index in range(2_000) for kind in ("keep", "reject")]
    body = orjson.dumps({"Pod": NAMES_FILTER.request["Pod"], "Nodes": None, "NodeNames": names})
    post(client, "/names/filter", body)
    post(client, "/names/prioritize", body)
    filtered, prioritized = (record.json_fields for record in decisions(caplog))
    [reason] = filtered["rejected"]["reasons"]
    assert filtered["rejected"]["count"] == reason["count"] == 2_000
    # The first by name, whatever order the scheduler sent them in.
    assert reason["nodes"] == sorted(f"reject-{index}" for index in range(2_000))[:NODES_PER_REASON]
    assert (prioritized["nodesIn"], len(prioritized["scores"])) == (4_000, TOP_N)
    assert max(len(orjson.dumps(filtered)), len(orjson.dumps(prioritized))) < 2_500


def test_the_entry_stays_small_however_long_the_names(client, caplog):
    huge = "x" * 1_000_000
    pod = json.loads(json.dumps(NAMES_FILTER.request["Pod"]))
    pod["metadata"].update(name=huge, namespace=huge, uid=huge)
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": [f"keep-{huge}", f"reject-{huge}"]})
    post(client, "/names/filter", body)
    post(client, "/names/prioritize", body)
    for entry in (record.json_fields for record in decisions(caplog)):
        assert len(orjson.dumps(entry)) < 4_000
        assert entry["pod"]["name"].startswith("xxx") and entry["pod"]["name"].endswith("more characters)")



def test_a_plugin_that_says_its_view_is_incomplete_marks_the_entry_and_others_cost_nothing(monkeypatch):
    from typing import ClassVar

    from extender.decision_log import decision_fields
    from extender.framework import plugin as plugin_module
    from extender.framework import status
    from extender.framework.profile import Profile, ScorePluginEntry
    from extender.framework.types import Node, Pod
    from extender.protocol import Route
    from extender.verbs import Answer
    from tests.test_framework import FixedScore, RejectByName

    class Partial(FixedScore):
        name: ClassVar[str] = "Partial"
        problem: ClassVar[str | None] = "the Kubernetes API hung: in-flight pods may be missing"

        def filter(self, pod, node):
            return status.SUCCESS

        def incomplete(self, *prepared):
            return self.problem

    def fields_of(verb, result):
        answer = Answer(body=None, result=result)
        return decision_fields(Route(verb, "p"), answer, 0.001, 5.0, method="POST", path=f"/{verb}")

    asked: list[str] = []
    default = plugin_module.Plugin.incomplete
    monkeypatch.setattr(plugin_module.Plugin, "incomplete", lambda self, *p: asked.append(self.name) or default(self))
    nodes = [Node("a"), Node("b")]
    partial = Partial({"a": 10, "b": 20})
    profile = Profile("p", filters=[RejectByName({}), partial], scores=[ScorePluginEntry(partial, 1)])
    marked = {"Partial": Partial.problem}
    assert fields_of("filter", profile.filter(Pod(uid="u"), nodes))["incomplete"] == marked
    assert fields_of("prioritize", profile.prioritize(Pod(uid="u"), nodes))["incomplete"] == marked
    assert asked == []  # a plugin that does not override the hook is never asked
    Partial.problem = None  # complete, as far as it knows: no mark
    assert "incomplete" not in fields_of("filter", profile.filter(Pod(uid="u"), nodes))
    assert "incomplete" not in fields_of("prioritize", profile.prioritize(Pod(uid="u"), nodes))


def test_the_top_scores_are_nlargests_whatever_the_ties():
    """The entry's top scores are taken from the nodes tied at the top when there are enough of them: the same nodes,
    in the same order, as ``heapq.nlargest`` over all scores (ties in the order of the scores)."""
    import heapq
    import random
    from operator import itemgetter

    from extender.decision_log import _kept_top
    from extender.framework.profile import ScoreResult

    rng = random.Random(7)
    for round_ in range(300):
        size = rng.choice([0, 1, 5, 9, 10, 11, 40, 500])
        highest = rng.choice([0, 1, 3, 10])
        scores = {f"node-{rng.randrange(10**6)}-{index}": rng.randint(0, highest) for index in range(size)}
        result = ScoreResult(scores, {"P": {name: score * 10 for name, score in scores.items()}})
        expected = heapq.nlargest(TOP_N, scores.items(), key=itemgetter(1))
        shown = [(entry["node"], entry["score"]) for entry in _kept_top(result)]
        assert shown == expected, round_
        assert result.best() == [name for name, score in scores.items() if score == max(scores.values())]


@pytest.mark.parametrize(
    "name", ["cpu", "it's-gpu", 'say "hi"', "both ' and \"", "back\\slash", "tab\there", "nœud-ü 🚀", "rule 'x'", ""]
)
def test_a_rule_is_read_back_from_its_reason_as_the_plugin_quoted_it(name):
    from extender.decision_log import _rule_named

    assert _rule_named(f"NodeLabelPolicy rule {name!r}: node lacks a label") == name
    assert _rule_named(f"NodeNameFilter: node is in maintenance {name!r} until 2026-12-01T02:00:00Z") == name
    assert _rule_named("NodeLoad: no rule named here") == ""
