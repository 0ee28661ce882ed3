"""A typical Python extender, for comparison: Flask's ``request.get_json()``, a loop over the nodes, jsonify.

It follows the protocol correctly (full-node answers echo the node objects,
prioritize answers a bare array) and applies a comparable policy: a deny list
of node-name globs, GPU nodes kept for GPU pods, and cheaper instance types
scored higher. Served by functions-framework exactly as the extender is.
"""

from __future__ import annotations

import fnmatch

import functions_framework
from flask import Request, Response, jsonify

DENY = ["gke-prod-us-highmem-*-0*"]
PRICES = {
    "e2-standard-4": 0.134,
    "n2-standard-8": 0.388,
    "n2-highmem-16": 0.944,
    "e2-standard-8": 0.268,
    "c3-standard-22": 1.086,
    "g2-standard-8": 0.854,
}


@functions_framework.http
def extender(request: Request) -> Response:
    args = request.get_json()
    verb = request.path.rstrip("/").rsplit("/", 1)[-1]
    full = args.get("Nodes") is not None
    nodes = args["Nodes"]["items"] if full else [{"metadata": {"name": name}} for name in args["NodeNames"]]
    if verb == "filter":
        kept, failed = [], {}
        for node in nodes:
            name = node["metadata"]["name"]
            labels = node["metadata"].get("labels") or {}
            if any(fnmatch.fnmatch(name, glob) for glob in DENY):
                failed[name] = "node is on the deny list"
            elif labels.get("cloud.google.com/gke-nodepool") == "gpu":
                failed[name] = "GPU nodes are kept for GPU pods"
            else:
                kept.append(node)
        answer = {"FailedNodes": failed, "FailedAndUnresolvableNodes": {}, "Error": ""}
        if full:
            answer.update(Nodes={"metadata": {}, "items": kept}, NodeNames=None)
        else:
            answer.update(Nodes=None, NodeNames=[node["metadata"]["name"] for node in kept])
        return jsonify(answer)
    prices = [
        PRICES.get((node["metadata"].get("labels") or {}).get("node.kubernetes.io/instance-type"), 1.0)
        for node in nodes
    ]
    cheapest, dearest = min(prices, default=0), max(prices, default=0)
    spread = (dearest - cheapest) or 1
    return jsonify(
        [
            {"Host": node["metadata"]["name"], "Score": round(10 * (dearest - price) / spread)}
            for node, price in zip(nodes, prices, strict=True)
        ]
    )
