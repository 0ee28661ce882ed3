"""Limits every decoder enforces on a request body, in one place: the full and the fast decoder must agree."""

from __future__ import annotations

# Far deeper than Kubernetes objects nest (the recorded requests reach 15 levels), far below
# orjson's own limits (1024 to decode; 254 to encode the node objects a filter answer echoes).
MAX_DEPTH = 64
# Above the largest cluster GKE supports (65,000 nodes).
MAX_NODES = 65_536
