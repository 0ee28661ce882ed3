"""Where kube-scheduler will bind a pod after prioritize: made sure enough to count it there from the answer on.

kube-scheduler adds the answer's scores (× weight × 10) to its own and binds the pod to the highest total, a little
later, while the next pods are judged. NodeLoad counts the pod from the answer on (``extender.kube.assume``) on the
node the answer makes the scheduler's choice: the one scored highest. When a few nodes tie for the highest score,
the scheduler's own scores, which the extender cannot see, or chance would pick among them, and the pod would count
on a guess until its binding shows: a burst would pile onto the node the guesses missed. So the answer breaks such
a tie itself: the tied node with the highest unrounded score (the weighted mean of its plugins' 0..100 scores that
the 0..10 score rounds), then the one with the fewest pods bound lately (what kube-scheduler's LeastAllocated favours
among equals), keeps the score, and the others of the tie get one point less. Over ``MAX_TIED`` tied nodes the tie
stands (among so many equals no node takes a burst) and the pod counts on the first of them with the fewest pods
bound lately.

One point (10 × weight of the scheduler's total) may also be all that parts the best node from the runners-up, the
nodes one point below it, and the scheduler's own scores, which favour the node with fewer pods requested, can make
that up. A runner-up would then take the pod while it counts on the best node, and the next pod, judged before that
binding shows, follow it there. So when the best nodes are few, a few runners-up (``MAX_TIED`` at most) get one
point less too, and trail the node the pod counts on by two points. More runners-up than that are left as they are,
as is a tie that stands. Nothing happens without a pod watch (no NodeLoad counting in-flight pods).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import countOf

from extender.framework.profile import (
    MIN_EXTENDER_PRIORITY,
    ScorePluginEntry,
    ScoreResult,
    nodes_scored,
    unrounded_scores,
)
from extender.kube import assume, assuming

MAX_TIED = 8


def assume_best(uid: str, result: ScoreResult, entries: Sequence[ScorePluginEntry]) -> None:
    """Assume the pod on the node ``result`` scores highest, breaking a tie of at most ``MAX_TIED`` nodes and
    parting it from at most ``MAX_TIED`` runners-up; the node and the nodes the answer then scores one point less are
    noted on ``result`` (``assumed``, ``demoted``)."""
    if not result.scores or not assuming():
        return
    tied = result.best()
    separate = 1 < len(tied) <= MAX_TIED and result.scores[tied[0]] > MIN_EXTENDER_PRIORITY
    candidates = tied
    if separate:
        means = unrounded_scores(entries, result, tied)
        best = max(means.values())
        candidates = [name for name in tied if means[name] == best]
    node = assume(uid, candidates)
    if node is None:
        return
    result.assumed = node
    demoted = [name for name in tied if name != node] if separate else []
    below = result.scores[node] - 1
    # Counted first, which builds nothing: in a large cluster the runners-up are usually many.
    if len(tied) <= MAX_TIED and below > MIN_EXTENDER_PRIORITY and countOf(result.scores.values(), below) <= MAX_TIED:
        demoted += nodes_scored(result.scores, below)
    result.demoted = tuple(demoted)
