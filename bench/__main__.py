"""``python -m bench``: the extender beside a typical Python extender and two floors, at 100, 1000 and 5000 nodes.

Self-contained (bodies are generated, servers started and stopped here) and
bounded: about 5 minutes on 2 idle cores; ``--quick`` takes well under one.
``--plot DIR`` draws a saved run instead (the latest, or ``--results FILE``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import plot, report
from bench.run import Plan, run
from bench.servers import ROOT

# Where each run is saved (ignored by git), and where --plot finds the latest.
RESULTS = ROOT / "bench" / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: N=100 and 1000, few rounds, one cold start each"
    )
    parser.add_argument("--sizes", help="comma-separated cluster sizes (default 100,1000,5000)")
    parser.add_argument(
        "--modes", default="names,full", help="node-name and/or full-node requests (default names,full)"
    )
    parser.add_argument("--reps", type=int, help="timed rounds per verb (default: by body size, 5..60)")
    parser.add_argument("--cold-starts", type=int, help="cold starts per server (default 3, --quick 1)")
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results/<time>.json")
    parser.add_argument(
        "--result-cache", choices=("on", "off"), default="on", help="the extender's EXTENDER_RESULT_CACHE (default on)"
    )
    parser.add_argument(
        "--against", metavar="COMMIT", help="also measure the extender of COMMIT in the same run (an A/B)"
    )
    parser.add_argument(
        "--plot",
        metavar="DIR",
        help=f"draw a saved run's results into DIR instead of running (needs {plot.REQUIREMENTS})",
    )
    parser.add_argument(
        "--results",
        metavar="FILE",
        help="with --plot: the results file to draw (default: the latest in bench/results/)",
    )
    args = parser.parse_args(argv)
    if args.plot:
        return _plot(Path(args.plot), Path(args.results) if args.results else None)
    if args.results:
        parser.error("--results goes with --plot")
    sizes = tuple(int(size) for size in (args.sizes or ("100,1000" if args.quick else "100,1000,5000")).split(","))
    modes = tuple(mode for mode in args.modes.split(",") if mode)
    if set(modes) - {"names", "full"}:
        parser.error("--modes takes names and/or full")
    plan = Plan(
        sizes=sizes,
        modes=modes,
        reps=args.reps or (3 if args.quick else None),
        cold_starts=args.cold_starts if args.cold_starts is not None else (1 if args.quick else 3),
        log=lambda line: print(line, file=sys.stderr, flush=True),
        result_cache=args.result_cache,
        against=exported(args.against) if args.against else None,
    )
    load_before, started = report.load(), time.monotonic()
    results = run(plan)
    text = "\n\n".join(
        [
            report.header(load_before, report.load()),
            report.table(results),
            report.targets(results),
            "Medians in ms, as docs/performance.md's results table:\n" + report.markdown(results),
        ]
    )
    print(text)
    if not args.no_save:
        path = report.save(results, text, RESULTS)
        print(f"\n(saved to {path.relative_to(ROOT)}; whole run {time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


def _plot(out: Path, results: Path | None) -> int:
    try:
        source = results or plot.latest_results(RESULTS)
        written = plot.plot(source, out)
    except (plot.MissingPlotLibrary, FileNotFoundError) as exc:
        print(f"python -m bench --plot: {exc}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in written))
    return 0


def exported(commit: str) -> tuple[Path, str]:
    """``commit``'s tree, exported once into .cache/bench-against/ (ignored by git), and its short name."""
    name = subprocess.run(
        ["git", "rev-parse", "--short", commit], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    root = ROOT / ".cache" / "bench-against" / name
    if not root.exists():
        partial = root.with_name(f"{name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        partial.rename(root)
    return root, name


if __name__ == "__main__":
    sys.exit(main())
