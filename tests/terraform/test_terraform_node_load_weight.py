"""A policy that scores with NodeLoad behind an extender weight too low for it is warned about at plan: at weight 1
kube-scheduler's own resource scores outweigh the load, and a burst spreads as without the extender (the herding
burst of docs/plugins/nodeload.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.terraform.support import REPO, plan

POLICIES = REPO / "tests" / "terraform" / "policies"
WARNING = "Warning: Check block assertion failed"
DEPLOYMENT = """
project_id         = "my-project"
function_location  = "us-central1"
invocation         = "public"
kubernetes_version = "1.33.5-gke.1200"
"""


@pytest.mark.parametrize(
    ("settings", "warned"),
    [
        (f'policy_file = "{POLICIES / "node-load-gke.yaml"}"', True),
        (f'policy_file = "{POLICIES / "node-load-gke.yaml"}"\nweight = 2', True),
        (f'policy_file = "{POLICIES / "node-load-gke.yaml"}"\nweight = 3', False),
        (f'policy_file = "{POLICIES / "node-load-gke.yaml"}"\nweight = 5', False),
        (f'policy_file = "{POLICIES / "node-load-gke.yaml"}"\nverbs = ["filter"]', False),
        (f'policy_file = "{POLICIES / "node-names.yaml"}"', False),
        ("", False),
    ],
    ids=["weight-1", "weight-2", "weight-3", "weight-5", "no-prioritize", "no-node-load-score", "embedded-policy"],
)
def test_node_load_scores_below_weight_3_are_warned_about(
    terraform: str, terraform_env: dict[str, str], preflight: Path, settings: str, warned: bool
) -> None:
    output = plan(terraform, terraform_env, preflight, DEPLOYMENT + settings + "\n")
    assert "Error:" not in output, output
    assert ("The policy scores nodes with NodeLoad" in output) == warned, output
    if warned:
        assert WARNING in output and "Set weight = 5" in output, output
