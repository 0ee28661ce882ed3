"""Limits every decoder enforces on a request body, in one place: the full and the fast decoder must agree."""

from __future__ import annotations

# Far deeper than Kubernetes objects nest (the recorded requests reach 15 levels), far below
# orjson's own limits (1024 to decode; 254 to encode the node objects a filter answer echoes).
MAX_DEPTH = 64
# Above the largest cluster GKE supports (65,000 nodes).
MAX_NODES = 65_536

# What decoding a body may cost in memory (extender.wire.decode_cost), at its peak as tracemalloc measures it: the
# Python objects the full decoder builds take at most VALUE_BYTES for each JSON value (the worst measured: 209, objects
# of one key of their own) and at most WORST_BYTES_PER_BYTE for each byte of body (the worst measured: 44,
# '{"":{}},' over and over); the fast decoder's bytes of a node item, RAW_ITEM_BYTES (64 measured).
VALUE_BYTES = 224
WORST_BYTES_PER_BYTE = 48
RAW_ITEM_BYTES = 72
# Decoding one body may take at most this many times EXTENDER_MAX_BODY_BYTES (256 MiB at the default 32 MiB).
DECODE_FACTOR = 8
# A decoding that may build this share of the limit or more is followed by giving memory back (extender.http.memory).
GIVE_BACK_SHARE = 4
# The fast decoder renders each node indented to measure its depth: up to RENDER_BYTES_PER_BYTE times its size while
# it is checked (a value every 2 bytes, each indented by its depth, up to the ~1000 levels msgspec reads). A node
# over PART_BYTES is left to the full decoder.
RENDER_BYTES_PER_BYTE = 512
PART_BYTES = 128 * 1024
