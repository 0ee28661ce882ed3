"""``python -m extender <command>`` (or ``gcf-extender <command>`` once the package is installed): the tools around
the function."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from extender.errors import ConfigError

# Command -> its module in extender/cli/, which exposes register(subparsers) setting ``run``.
COMMANDS = {
    "check-policy": "check_policy",
    "check-scheduler-config": "check_scheduler_config",
    "explain": "explain",
    "proxy": "proxy",
    "serve": "serve",
}


# The console script pip installs (pyproject.toml): the same commands, from any directory.
SCRIPT = "gcf-extender"


def main(argv: list[str] | None = None, prog: str = "python -m extender") -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Import only the chosen command: the proxy sidecar must not pay for (or need) the whole function.
    modules = [COMMANDS[argv[0]]] if argv and argv[0] in COMMANDS else list(COMMANDS.values())
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in modules:
        importlib.import_module(f"extender.cli.{module}").register(subparsers)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except ConfigError as exc:  # the tools read the environment's settings as the function does
        print(f"{prog} {args.command}: {exc}", file=sys.stderr)
        return 2


def command() -> int:
    """The ``gcf-extender`` console script. The directory it runs in comes first on the import path, as with
    ``python -m extender``: a policy's ``pluginModules`` live beside it, as beside main.py where it is deployed."""
    sys.path.insert(0, os.getcwd())
    return main(prog=SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
