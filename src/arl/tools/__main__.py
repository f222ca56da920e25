"""`python -m arl.tools [--calls N]`: which sandbox layers are in force here, and what a call costs.

Prints the capability report, then the latency of N sandboxed `print(1)` calls (one at a time) with
every layer, without the seccomp filter, and without the namespaces, so the cost of each is visible.
The numbers in docs/sandbox.md come from this command.
"""

from __future__ import annotations

import argparse
import statistics
import warnings

from arl.tools.sandbox import Sandbox, SandboxConfig


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m arl.tools", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls per configuration (default 20)")
    args = parser.parse_args()
    print(Sandbox().capabilities().describe())
    print(f"\nlatency of print(1), {args.calls} calls each, one at a time (seconds):")
    print(f"{'configuration':32s} {'median':>7s} {'min':>7s} {'max':>7s}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the layers turned off here are off on purpose
        for label, config in (("every layer", SandboxConfig()),
                              ("without seccomp", SandboxConfig(seccomp=False)),
                              ("without namespaces", SandboxConfig(namespaces=False, allow_unisolated=True))):
            sandbox = Sandbox(config)
            sandbox.run("pass")  # warm the page cache
            latencies = [sandbox.run("print(1)").latency_s for _ in range(args.calls)]
            print(f"{label:32s} {statistics.median(latencies):7.3f} {min(latencies):7.3f} {max(latencies):7.3f}")


if __name__ == "__main__":
    main()
