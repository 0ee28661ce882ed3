"""``python -m extender <command>``: the tools around the function."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each command lives in extender/cli/<module>.py and exposes register(subparsers), which sets ``run``.
COMMANDS = ["check_policy", "explain", "proxy", "serve"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extender", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        importlib.import_module(f"extender.cli.{module}").register(subparsers)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
