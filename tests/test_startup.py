"""Start-up in one function: the process is tuned for serving only when it starts, and left as it was otherwise."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from extender.errors import ConfigError
from extender.settings import Settings
from extender.startup import start
from tests.conftest import ROOT, make_client

# Compared with the count before start-up: some interpreters (CPython 3.12) begin with objects already frozen.
PROBE = (
    "import gc, json; before = gc.get_freeze_count(); from extender.startup import start; start();"
    " print(json.dumps([gc.isenabled(), gc.get_freeze_count() > before]))"
)


def started_process(**env: str) -> list[bool]:
    """Whether the collector runs, and whether ``start`` froze objects, in a fresh interpreter."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("EXTENDER_")} | env
    finished = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=environment, capture_output=True, text=True, check=False
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)


def test_a_served_process_is_tuned_and_collects_again_after_start_up():
    assert started_process() == [True, True]


def test_with_tuning_off_the_process_is_left_alone():
    assert started_process(EXTENDER_PROCESS_TUNING="off") == [True, False]


def test_a_failed_start_up_leaves_the_collector_running_and_nothing_frozen(monkeypatch, tmp_path):
    monkeypatch.setenv("EXTENDER_PROCESS_TUNING", "on")
    monkeypatch.setenv("EXTENDER_POLICY", str(tmp_path / "missing.yaml"))
    frozen = gc.get_freeze_count()
    with pytest.raises(SystemExit, match="cannot read the file"):
        start()
    assert gc.isenabled() and gc.get_freeze_count() <= frozen


def test_the_tests_in_process_apps_leave_the_test_process_alone(monkeypatch):
    frozen = gc.get_freeze_count()
    make_client(monkeypatch)
    # Nothing newly frozen (objects frozen before may have been freed since).
    assert gc.isenabled() and gc.get_freeze_count() <= frozen


def test_a_bad_tuning_setting_stops_start_up_naming_it(monkeypatch):
    monkeypatch.setenv("EXTENDER_PROCESS_TUNING", "maybe")
    with pytest.raises(SystemExit, match="EXTENDER_PROCESS_TUNING must be on or off"):
        start()
    assert gc.isenabled()


def test_the_switches_are_read_in_one_place_and_refuse_other_words():
    assert Settings.from_environment({}) == Settings(result_cache=True, full_decoder=False, process_tuning=True)
    assert Settings.from_environment(
        {"EXTENDER_RESULT_CACHE": "OFF", "EXTENDER_DECODER": "full", "EXTENDER_PROCESS_TUNING": " off "}
    ) == Settings(result_cache=False, full_decoder=True, process_tuning=False)
    with pytest.raises(ConfigError, match="EXTENDER_RESULT_CACHE must be on or off, got 'no'"):
        Settings.from_environment({"EXTENDER_RESULT_CACHE": "no"})
    with pytest.raises(ConfigError, match="EXTENDER_DECODER must be fast or full"):
        Settings.from_environment({"EXTENDER_DECODER": "lean"})


# Modules the first filter answer with the embedded default policy does not need: each is imported when a policy,
# a setting or a verb asks for it. Importing one at start-up again makes every cold start later.
LAZY_AT_START_UP = (
    "yaml",  # policy files are YAML; the embedded default is loaded from its JSON form
    "requests",  # the identity proxy, and google-auth's token requests (NodeLoad's auth: google)
    "urllib3",
    "extender.kube.client",  # the Kubernetes API client, only with KUBERNETES_API_URL
    "extender.kube.lists",
    "extender.outbound",
    "extender.nodesource.kubernetes",  # node sources: only the one a policy chooses
    "extender.nodesource.static",
    "extender.nodesource.gke_names",
    "extender.framework.selectors",  # label and pod selectors: plugins the default policy does not enable
    "extender.plugins.instancecost",
    "extender.plugins.nodeload",  # and what it imports: the Prometheus client, google-auth
    "extender.plugins.nodelabelpolicy",
    "extender.plugins.protectedvictims",
    "extender.plugins.topologypreference",
    "extender.plugins.nodenamefilter.windows",  # maintenance windows
    "zoneinfo",
    "extender.kube.config",  # only with KUBERNETES_* set
    "extender.nodesource.schema",  # only for a policy with a nodeSource
    "extender.wire.fast_decoder",  # bodies with node objects: a node-name body goes to the full decoder
    "msgspec",
    "extender.verbs.prioritize",  # verbs not called yet
    "extender.verbs.preempt",
    "extender.verbs.bind",
    "extender.wire.preemption",
    "extender.wire.binding",
    "extender.wire.priorities",
    "extender.cli",  # python -m extender, never at serve time
    "extender.proxy",
    "google.cloud.logging",  # deferred until the first answer has been sent (docs/observability.md)
    "google.auth",
)

# A node-name filter request to the function served from main.py, in a fresh interpreter.
SERVED = """
import json, sys
import functions_framework
client = functions_framework.create_app(target="extender", source="main.py").test_client()
pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}}
body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["node-a", "node-b"]})
filter = lambda: client.post("/filter", data=body, content_type="application/json")
"""

FIRST_FILTER = SERVED + """
answer = filter()
print(json.dumps({"status": answer.status_code, "answer": answer.get_json(), "modules": sorted(sys.modules)}))
"""


def served_process(program: str) -> object:
    """What ``program`` prints last, as JSON, run on Cloud Run's environment in a fresh interpreter."""
    cloud_run = {"K_SERVICE": "extender", "K_REVISION": "extender-00001-abc", "GOOGLE_CLOUD_PROJECT": "p"}
    finished = subprocess.run(
        [sys.executable, "-c", program],
        check=False,
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], **cloud_run},
        capture_output=True,
        text=True,
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout.splitlines()[-1])


def test_the_first_filter_answer_with_the_default_policy_imports_only_what_it_needs():
    result = served_process(FIRST_FILTER)
    assert result["status"] == 200 and result["answer"]["NodeNames"] == ["node-a", "node-b"]
    loaded = set(result["modules"])
    assert not [name for name in LAZY_AT_START_UP if name in loaded or any(m.startswith(name + ".") for m in loaded)]


# The allocator's tuning, recorded instead of applied; the WSGI server closes each answer once it is sent.
TUNED = """
import extender.http.memory
held = []
extender.http.memory.hold_malloc_thresholds = lambda: held.append(True)
""" + SERVED + """
seen = [len(held)]
for _ in range(2):
    answer = filter()
    seen.append(len(held))
    answer.close()
    seen.append(len(held))
print(json.dumps(seen))
"""


def test_the_allocator_is_tuned_once_before_any_request_is_served():
    # Held at start-up, before gunicorn forks the worker and its threads serve (a thread that allocated first would
    # keep a heap of its own); answers change nothing.
    assert served_process(TUNED) == [1, 1, 1, 1, 1]


@pytest.mark.parametrize("as_deployed", [True, False])
def test_start_up_says_when_the_allocator_is_not_set_up_as_deployed(as_deployed):
    """The memory of large requests comes back only in part otherwise (extender.http.memory): the log says so."""
    from extender.settings import ALLOCATOR_ENVIRONMENT

    environment = {key: value for key, value in os.environ.items() if key not in ALLOCATOR_ENVIRONMENT}
    environment |= dict(ALLOCATOR_ENVIRONMENT) if as_deployed else {"PYTHONMALLOC": "malloc"}
    probe = "import logging; logging.basicConfig(level=logging.INFO); from extender.startup import start; start()"
    finished = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=environment, capture_output=True, text=True, check=False
    )
    assert finished.returncode == 0, finished.stderr
    said = "the allocator is not set up as deployed (PYTHONMALLOC=malloc GLIBC_TUNABLES=glibc.malloc.tcache_count=1)"
    assert (said in finished.stderr) is not as_deployed, finished.stderr
