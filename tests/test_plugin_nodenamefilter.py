"""NodeNameFilter: allow/deny globs and maintenance windows, with an injected clock."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
import yaml
from marshmallow import ValidationError

from extender.framework.clock import utc_now
from extender.framework.plugin import SKIP
from extender.framework.profile import Profile
from extender.framework.status import Code
from extender.framework.types import Node
from extender.plugins.nodenamefilter import NodeNameFilter
from extender.wire.errors import flatten_errors
from tests.plugin_helpers import build, pod

UTC = dt.UTC


def at(text: str):
    """A clock frozen at ``text`` (RFC 3339)."""
    instant = dt.datetime.fromisoformat(text)
    return lambda: instant


def verdicts(args, names, now="2026-03-04T12:00:00Z"):
    plugin = build(NodeNameFilter, args, clock=at(now))
    return {name: plugin.filter(pod(), Node(name)) for name in names}


NAMES = ["gke-prod-pool-a-1", "gke-prod-pool-b-1", "gke-prod-canary-1", "gke-dev-pool-a-1"]


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        ({}, NAMES),
        ({"allow": [], "deny": []}, NAMES),
        ({"allow": ["gke-prod-*"]}, NAMES[:3]),
        ({"deny": ["*-canary-*"]}, [NAMES[0], NAMES[1], NAMES[3]]),
        # deny wins over allow
        ({"allow": ["gke-prod-*"], "deny": ["*-canary-*"]}, NAMES[:2]),
        ({"allow": ["gke-prod-pool-?-1", "gke-dev-*"]}, [NAMES[0], NAMES[1], NAMES[3]]),
        ({"allow": ["gke-prod-pool-[a]-*"]}, NAMES[:1]),
        # all nodes rejected
        ({"deny": ["*"]}, []),
        ({"allow": ["nothing-*"]}, []),
        # globs match the whole name, not a part of it
        ({"allow": ["pool-a"]}, []),
    ],
)
def test_allow_and_deny_globs(args, kept):
    results = verdicts(args, NAMES)
    assert [name for name, outcome in results.items() if outcome.is_success] == kept
    for outcome in results.values():
        if not outcome.is_success:
            assert outcome.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            assert outcome.reason.startswith("NodeNameFilter: node name is ")


def maintenance(*windows, nodes=("gke-prod-pool-a-*",)):
    return {"maintenance": [{"name": "pool-a-upgrade", "nodes": list(nodes), "windows": list(windows)}]}


ONE_OFF = {"start": "2026-03-01T22:00:00Z", "end": "2026-03-02T04:00:00Z"}
# Saturday 22:00 to Sunday 04:00, Berlin wall-clock time.
WEEKEND_NIGHT = {"days": ["Sat"], "from": "22:00", "to": "04:00", "timeZone": "Europe/Berlin"}


@pytest.mark.parametrize(
    ("window", "now", "closed_until"),
    [
        (ONE_OFF, "2026-03-01T21:59:59Z", None),
        (ONE_OFF, "2026-03-01T22:00:00Z", "2026-03-02T04:00:00+00:00"),  # start inclusive
        (ONE_OFF, "2026-03-02T03:59:59Z", "2026-03-02T04:00:00+00:00"),
        (ONE_OFF, "2026-03-02T04:00:00Z", None),  # end exclusive
        # Offsets in the timestamps are honoured: 23:00+01:00 is 22:00Z.
        (
            {"start": "2026-03-01T23:00:00+01:00", "end": "2026-03-02T05:00:00+01:00"},
            "2026-03-01T22:30:00Z",
            "2026-03-02T05:00:00+01:00",
        ),
        # Winter: Berlin is UTC+1, so Saturday 22:00 local is 21:00Z.
        (WEEKEND_NIGHT, "2026-02-07T20:59:00Z", None),
        (WEEKEND_NIGHT, "2026-02-07T21:00:00Z", "2026-02-08T04:00:00+01:00"),
        (WEEKEND_NIGHT, "2026-02-08T02:59:00Z", "2026-02-08T04:00:00+01:00"),  # past midnight: Sunday 03:59 local
        (WEEKEND_NIGHT, "2026-02-08T03:00:00Z", None),
        # Summer: UTC+2, the same wall-clock window is an hour earlier in UTC.
        (WEEKEND_NIGHT, "2026-07-04T20:00:00Z", "2026-07-05T04:00:00+02:00"),
        (WEEKEND_NIGHT, "2026-07-04T19:59:00Z", None),
        # Other days stay open, including Saturday night's start on a Sunday.
        (WEEKEND_NIGHT, "2026-02-08T21:30:00Z", None),
        (WEEKEND_NIGHT, "2026-02-06T21:30:00Z", None),
        # Weekly windows default to UTC and to every day.
        ({"from": "09:00", "to": "17:00"}, "2026-03-04T08:59:00Z", None),
        ({"from": "09:00", "to": "17:00"}, "2026-03-04T09:00:00Z", "2026-03-04T17:00:00+00:00"),
        ({"from": "09:00", "to": "17:00"}, "2026-03-04T17:00:00Z", None),
        ({"days": ["Mon"], "from": "00:00", "to": "24:00"}, "2026-03-02T23:59:00Z", "2026-03-03T00:00:00+00:00"),
        ({"days": ["Mon"], "from": "00:00", "to": "24:00"}, "2026-03-03T00:00:00Z", None),
    ],
)
def test_maintenance_windows(window, now, closed_until):
    results = verdicts(maintenance(window), ["gke-prod-pool-a-1", "gke-prod-pool-b-1"], now=now)
    assert results["gke-prod-pool-b-1"].is_success, "nodes the entry does not name are never closed"
    outcome = results["gke-prod-pool-a-1"]
    if closed_until is None:
        assert outcome.is_success, outcome
    else:
        assert outcome.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert outcome.reason == f"NodeNameFilter: node is in maintenance 'pool-a-upgrade' until {closed_until}"


def test_dst_change_night_keeps_wall_clock_times():
    # Berlin springs forward on 2026-03-29 at 02:00 -> 03:00: Saturday 22:00 (UTC+1) to Sunday 04:00 (UTC+2).
    window = {"days": ["Sat"], "from": "22:00", "to": "04:00", "timeZone": "Europe/Berlin"}

    def closed(now):
        return not verdicts(maintenance(window), ["gke-prod-pool-a-1"], now=now)["gke-prod-pool-a-1"].is_success

    assert not closed("2026-03-28T20:59:00Z")
    assert closed("2026-03-28T21:00:00Z")
    assert closed("2026-03-29T01:59:00Z")
    assert not closed("2026-03-29T02:00:00Z")  # 04:00 CEST


def test_until_names_the_seconds_of_the_end():
    window = {"start": "2026-03-01T22:00:00Z", "end": "2026-03-02T04:00:30+01:00"}
    outcome = verdicts(maintenance(window), ["gke-prod-pool-a-1"], now="2026-03-02T03:00:15Z")["gke-prod-pool-a-1"]
    assert outcome.reason.endswith("until 2026-03-02T04:00:30+01:00")  # used to say 04:00+01:00, 30 s early


# Berlin springs forward on Sunday 2026-03-29 at 02:00 CET (01:00Z) to 03:00 CEST: 02:00-03:00 never happens.
# It falls back on Sunday 2026-10-25 at 03:00 CEST (01:00Z) to 02:00 CET: 02:00-03:00 happens twice.
@pytest.mark.parametrize(
    ("window", "now", "closed_until"),
    [
        # A window inside the gap opens at its end (03:00 CEST), for its length; it used to never open.
        ({"from": "02:15", "to": "02:45"}, "2026-03-29T00:59:59Z", None),
        ({"from": "02:15", "to": "02:45"}, "2026-03-29T01:00:00Z", "2026-03-29T03:30:00+02:00"),
        ({"from": "02:15", "to": "02:45"}, "2026-03-29T01:29:59Z", "2026-03-29T03:30:00+02:00"),
        ({"from": "02:15", "to": "02:45"}, "2026-03-29T01:30:00Z", None),
        # A start in the gap opens after it; an end in the gap closes when the gap ends.
        ({"from": "02:30", "to": "05:00"}, "2026-03-29T01:00:00Z", "2026-03-29T05:00:00+02:00"),
        ({"from": "01:30", "to": "02:30"}, "2026-03-29T00:30:00Z", "2026-03-29T03:00:00+02:00"),
        ({"from": "01:30", "to": "02:30"}, "2026-03-29T01:00:00Z", None),
        # In the fold, the first occurrence counts: 02:10-02:40 CEST, not again at 02:10-02:40 CET.
        ({"from": "02:10", "to": "02:40"}, "2026-10-25T00:10:00Z", "2026-10-25T02:40:00+02:00"),
        ({"from": "02:10", "to": "02:40"}, "2026-10-25T01:20:00Z", None),  # used to say until 02:40+02:00, past
        # A window across the fold ends at the first 02:30 (CEST); one ending after the fold names CET's offset.
        ({"from": "01:00", "to": "02:30"}, "2026-10-25T00:20:00Z", "2026-10-25T02:30:00+02:00"),
        ({"from": "01:00", "to": "02:30"}, "2026-10-25T00:30:00Z", None),
        ({"from": "01:00", "to": "04:00"}, "2026-10-25T02:30:00Z", "2026-10-25T04:00:00+01:00"),
    ],
)
def test_dst_gaps_and_folds(window, now, closed_until):
    window = {"days": ["Sun"], "timeZone": "Europe/Berlin", **window}
    outcome = verdicts(maintenance(window), ["gke-prod-pool-a-1"], now=now)["gke-prod-pool-a-1"]
    if closed_until is None:
        assert outcome.is_success, outcome
    else:
        assert outcome.reason == f"NodeNameFilter: node is in maintenance 'pool-a-upgrade' until {closed_until}"


def test_overlapping_windows_report_the_latest_end():
    args = maintenance(ONE_OFF, {"start": "2026-03-01T23:00:00Z", "end": "2026-03-02T06:00:00Z"})
    outcome = verdicts(args, ["gke-prod-pool-a-1"], now="2026-03-02T01:00:00Z")["gke-prod-pool-a-1"]
    assert outcome.reason.endswith("until 2026-03-02T06:00:00+00:00")


def test_the_clock_is_read_once_per_request_so_all_its_nodes_are_judged_at_one_instant():
    # The window closes at 04:00: a request that straddles it must not judge half of its nodes on each side.
    ticks = iter(dt.datetime(2026, 3, 2, 3, 59, 59, tzinfo=UTC) + dt.timedelta(seconds=n) for n in range(100))
    profile = Profile("p", filters=[build(NodeNameFilter, maintenance(ONE_OFF), clock=lambda: next(ticks))])
    result = profile.filter(pod(), [Node(f"gke-prod-pool-a-{n}") for n in range(5)])
    assert result.feasible == [] and len(result.rejected) == 5
    # The next request reads the clock again: 04:00:00, the window has closed.
    assert profile.filter(pod(), [Node("gke-prod-pool-a-1")]).feasible == ["gke-prod-pool-a-1"]


def test_the_default_clock_is_aware_utc():
    now = utc_now()
    assert now.utcoffset() == dt.timedelta(0)
    assert abs(now - dt.datetime.now(UTC)) < dt.timedelta(seconds=5)


def test_time_zones_load_without_a_system_tz_database():
    # Cloud Functions images may lack /usr/share/zoneinfo: the tzdata package (requirements.txt) must answer.
    zoneinfo.reset_tzpath(to=[])
    zoneinfo.ZoneInfo.clear_cache()
    try:
        zone = NodeNameFilter.args_schema().load(maintenance(WEEKEND_NIGHT))["maintenance"][0].windows[0].zone
        assert dt.datetime(2026, 7, 4, tzinfo=zone).utcoffset() == dt.timedelta(hours=2)
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()


def test_yaml_timestamps_load_like_strings():
    from_yaml = yaml.safe_load("start: 2026-03-01T22:00:00Z\nend: 2026-03-02T04:00:00Z")
    assert isinstance(from_yaml["start"], dt.datetime)
    outcome = verdicts(maintenance(from_yaml), ["gke-prod-pool-a-1"], now="2026-03-02T00:00:00Z")["gke-prod-pool-a-1"]
    assert not outcome.is_success


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"deny": "gke-*"}, "deny: Not a valid list."),
        ({"allow": [""]}, "allow[0]: a glob cannot be empty"),
        # Globs that can never match a node name (a lowercase RFC 1123 name) would silently deny nothing.
        ({"deny": ["gke-[prod-*"]}, "deny[0]: glob 'gke-[prod-*': the bracket opened at position 4 is never closed"),
        (
            {"deny": ["GKE-prod-*"]},
            (
                "deny[0]: glob 'GKE-prod-*' can never match a node name: 'E', 'G', 'K' cannot appear in one"
                " (node names hold lowercase letters, digits, '-' and '.'; globs add *, ? and [...])"
            ),
        ),
        (
            {"deny": ["pool_a-*"]},
            (
                "deny[0]: glob 'pool_a-*' can never match a node name: '_' cannot appear in one"
                " (node names hold lowercase letters, digits, '-' and '.'; globs add *, ? and [...])"
            ),
        ),
        ({"allow": ["a]*"]}, "allow[0]: glob 'a]*': ']' at position 1 closes no bracket"),
        ({"allow": ["node-[]"]}, "allow[0]: glob 'node-[]': the bracket at position 5 is empty"),
        (
            {"maintenance": [{"name": "m", "nodes": ["Node-*"], "windows": [{"from": "01:00", "to": "02:00"}]}]},
            (
                "maintenance[0].nodes[0]: glob 'Node-*' can never match a node name: 'N' cannot appear in one"
                " (node names hold lowercase letters, digits, '-' and '.'; globs add *, ? and [...])"
            ),
        ),
        (
            {"maintenance": [{"nodes": ["x"], "windows": [ONE_OFF]}]},
            "maintenance[0].name: Missing data for required field.",
        ),
        (
            {"maintenance": [{"name": "m", "nodes": [], "windows": [ONE_OFF]}]},
            "maintenance[0].nodes: Shorter than minimum length 1.",
        ),
        (
            {"maintenance": [{"name": "m", "nodes": ["x"], "windows": []}]},
            "maintenance[0].windows: Shorter than minimum length 1.",
        ),
        (
            {
                "maintenance": [
                    {"name": "m", "nodes": ["x"], "windows": [ONE_OFF]},
                    {"name": "m", "nodes": ["y"], "windows": [ONE_OFF]},
                ]
            },
            "maintenance[1].name: duplicate rule name 'm'",
        ),
        (maintenance({}), "maintenance[0].windows[0]: a window needs start and end (one-off) or from and to (weekly)"),
        (
            maintenance({"start": "2026-03-01T22:00:00Z"}),
            "maintenance[0].windows[0].end: Missing data for required field.",
        ),
        (
            maintenance({"start": "2026-03-01T22:00:00"}),
            ("maintenance[0].windows[0].start: 2026-03-01T22:00:00 has no UTC offset: end it with Z or an offset such "
             "as +01:00"),
        ),
        (
            maintenance({"start": "yesterday", "end": "2026-03-01T22:00:00Z"}),
            "maintenance[0].windows[0].start: 'yesterday' is not an RFC 3339 timestamp such as 2026-03-01T22:00:00Z",
        ),
        (
            maintenance({"start": 5, "end": "2026-03-01T22:00:00Z"}),
            "maintenance[0].windows[0].start: must be an RFC 3339 timestamp such as 2026-03-01T22:00:00Z",
        ),
        (
            maintenance({"start": "2026-03-02T04:00:00Z", "end": "2026-03-01T22:00:00Z"}),
            "maintenance[0].windows[0].end: must be after start (2026-03-02T04:00:00+00:00)",
        ),
        (
            maintenance({"start": "2026-03-01T22:00:00Z", "end": "2026-03-02T04:00:00Z", "days": ["Sat"]}),
            ("maintenance[0].windows[0]: a window is either one-off (start, end) or weekly (days, from, to, timeZone), "
             "not both"),
        ),
        (maintenance({"from": "22:00"}), "maintenance[0].windows[0].to: Missing data for required field."),
        (
            maintenance({"from": 1320, "to": "04:00"}),
            'maintenance[0].windows[0].from: Not a valid string: a time of day is a quoted "HH:MM".',
        ),
        (
            maintenance({"from": "7:00", "to": "08:00"}),
            (
                "maintenance[0].windows[0].from: '7:00' is not a time of day \"HH:MM\" (00:00..23:59, or 24:00 as an "
                "end): write '07:00'"
            ),
        ),
        (
            maintenance({"from": "24:00", "to": "08:00"}),
            "maintenance[0].windows[0].from: a window cannot start at 24:00: use 00:00",
        ),
        (maintenance({"from": "08:00", "to": "08:00"}), "maintenance[0].windows[0].to: must differ from from"),
        (
            maintenance({"days": ["Sat", "Sunday"], "from": "08:00", "to": "09:00"}),
            "maintenance[0].windows[0].days[1]: unknown day 'Sunday': use Mon, Tue, Wed, Thu, Fri, Sat, Sun",
        ),
        (
            maintenance({"days": [], "from": "08:00", "to": "09:00"}),
            "maintenance[0].windows[0].days: Shorter than minimum length 1.",
        ),
        (
            maintenance({"from": "08:00", "to": "09:00", "timeZone": "CEST"}),
            ("maintenance[0].windows[0].timeZone: unknown time zone 'CEST': use an IANA name such as Europe/Berlin or "
             "UTC"),
        ),
        (
            maintenance({"from": "08:00", "to": "09:00", "timeZone": "../etc/passwd"}),
            ("maintenance[0].windows[0].timeZone: unknown time zone '../etc/passwd': use an IANA name such as "
             "Europe/Berlin or UTC"),
        ),
        (maintenance({"from": "08:00", "until": "09:00"}), "maintenance[0].windows[0].until: Unknown field."),
    ],
)
def test_invalid_args_name_the_field(args, expected):
    with pytest.raises(ValidationError) as caught:
        NodeNameFilter.args_schema().load(args)
    assert expected in flatten_errors(caught.value.messages), flatten_errors(caught.value.messages)


# --- Maintenance for some pods only (``pods``) ---------------------------------------------------------------------

LEGACY = {
    "maintenance": [
        {
            "name": "legacy-patching",
            "nodes": ["gke-prod-legacy-*"],
            "pods": {"namespaces": ["payments"]},
            "windows": [{"days": ["Tue"], "from": "01:00", "to": "03:00", "timeZone": "Europe/Berlin"}],
        }
    ]
}
# Tuesday 2026-03-03 01:30 in Berlin (CET, +01:00).
IN_THE_WINDOW = "2026-03-03T00:30:00Z"


def test_a_window_with_pods_closes_its_nodes_to_the_pods_it_selects_only():
    plugin = build(NodeNameFilter, LEGACY, clock=at(IN_THE_WINDOW))
    legacy, other = Node("gke-prod-legacy-1"), Node("gke-prod-pool-a-1")
    rejected = plugin.filter(pod(namespace="payments"), legacy)
    assert rejected.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert rejected.reason == (
        "NodeNameFilter: node is in maintenance 'legacy-patching' until 2026-03-03T03:00:00+01:00 "
        "for pods namespace in (payments)"
    )
    assert plugin.filter(pod(namespace="shop"), legacy).is_success
    assert plugin.filter(pod(namespace="payments"), other).is_success
    # Outside the window the selected pods pass too.
    later = build(NodeNameFilter, LEGACY, clock=at("2026-03-03T02:30:00Z"))
    assert later.filter(pod(namespace="payments"), legacy).is_success


@pytest.mark.parametrize("pods", ["absent", {}, None], ids=["absent", "empty", "null"])
def test_a_window_without_pods_closes_its_nodes_to_every_pod_and_says_no_selector(pods):
    args = {"maintenance": [{**LEGACY["maintenance"][0], "pods": pods}]}
    if pods == "absent":
        del args["maintenance"][0]["pods"]
    plugin = build(NodeNameFilter, args, clock=at(IN_THE_WINDOW))
    for namespace in ("payments", "shop", "kube-system"):
        outcome = plugin.filter(pod(namespace=namespace), Node("gke-prod-legacy-1"))
        until = "2026-03-03T03:00:00+01:00"
        assert outcome.reason == f"NodeNameFilter: node is in maintenance 'legacy-patching' until {until}"


def test_pods_take_every_criterion_of_the_shared_pod_selector():
    selector = {
        "excludeNamespaces": ["kube-system"],
        "labelSelector": {"matchLabels": {"tier": "web"}},
        "annotationSelector": {"matchExpressions": [{"key": "example.com/pinned", "operator": "DoesNotExist"}]},
        "priority": {"max": 999},
    }
    args = {"maintenance": [{**LEGACY["maintenance"][0], "pods": selector}]}
    plugin = build(NodeNameFilter, args, clock=at(IN_THE_WINDOW))
    legacy = Node("gke-prod-legacy-1")
    web = {"labels": {"tier": "web"}}
    closed = plugin.filter(pod(**web), legacy)
    assert closed.reason.endswith(
        "for pods namespace notin (kube-system), labels tier=web, annotations !example.com/pinned, priority<=999"
    )
    assert plugin.filter(pod(namespace="kube-system", **web), legacy).is_success
    assert plugin.filter(pod(), legacy).is_success  # no tier=web label
    assert plugin.filter(pod(priority=1000, **web), legacy).is_success
    assert plugin.filter(pod(annotations={"example.com/pinned": "yes"}, **web), legacy).is_success


def test_the_reuse_key_tells_a_selected_pod_from_another_so_kept_verdicts_never_cross():
    plugin = build(NodeNameFilter, LEGACY, clock=at(IN_THE_WINDOW))
    payments, shop = pod(namespace="payments"), pod(namespace="shop")
    assert plugin.reuse_key(payments, plugin.prepare(payments)) != plugin.reuse_key(shop, plugin.prepare(shop))
    # Nothing closed to the other pod, and no list: no node can fail it.
    assert plugin.prepare(shop) is SKIP


def test_a_window_for_some_pods_through_a_profile_with_kept_results():
    from extender.framework.kept import keeping_results
    from tests.plugin_helpers import ListedNodes

    plugin = build(NodeNameFilter, LEGACY, clock=at(IN_THE_WINDOW))
    served = keeping_results(Profile("default", filters=[plugin]), enabled=True)
    source = ListedNodes([Node("gke-prod-legacy-1"), Node("gke-prod-pool-a-1")])
    names = ["gke-prod-legacy-1", "gke-prod-pool-a-1"]
    for _ in range(2):  # the second time from kept verdicts
        assert served.filter_names(pod(namespace="payments"), names, source).feasible == ["gke-prod-pool-a-1"]
        assert served.filter_names(pod(namespace="shop"), names, source).feasible == names


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        ({"namespace": ["payments"]}, "maintenance[0].pods.namespace: Unknown field."),
        ({"namespaces": ["Payments"]}, "maintenance[0].pods.namespaces[0]: 'Payments' is not a valid namespace name"),
        ({"priority": {"min": 10, "max": 1}}, "maintenance[0].pods.priority: min (10) is above max (1)"),
        (
            {"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In"}]}},
            "maintenance[0].pods.labelSelector.matchExpressions[0].values: In needs at least one value",
        ),
    ],
)
def test_invalid_pods_name_the_field(pods, expected):
    args = {"maintenance": [{**LEGACY["maintenance"][0], "pods": pods}]}
    with pytest.raises(ValidationError) as caught:
        NodeNameFilter.args_schema().load(args)
    assert any(problem.startswith(expected) for problem in flatten_errors(caught.value.messages)), flatten_errors(
        caught.value.messages
    )
