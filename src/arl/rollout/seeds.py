"""The sampling seeds of a run: one formula, so that no two requests of a run share a seed.

A request is named by (run seed, step, request index within the step), and its seed is that triple as
a mixed-radix number,

    seed = (run_seed * 2^STEP_BITS + step) * 2^REQUEST_BITS + request

for 0 <= run_seed < 2^RUN_BITS, 0 <= step < 2^STEP_BITS, 0 <= request < 2^REQUEST_BITS: distinct
triples give distinct seeds (each part has its own digits), and every seed is below 2^63. A step of a
single-turn chapter numbers its prompts 0, 1, ... (refills go on counting); a multi-turn step numbers
each (turn, group, branch) with `branch_request`.
"""

from __future__ import annotations

RUN_BITS, STEP_BITS, REQUEST_BITS = 16, 20, 27
TURN_BITS, GROUP_BITS, BRANCH_BITS = 7, 10, 10
"""A multi-turn step's request index: turn, group and branch as mixed-radix digits (27 bits in all)."""


def _check(name: str, value: int, bits: int) -> int:
    if not 0 <= value < 2 ** bits:
        raise ValueError(f"{name}={value}: a sampling seed holds {name}s from 0 to {2 ** bits - 1}")
    return value


def request_seed(run_seed: int, step: int, request: int = 0) -> int:
    """The seed of request `request` of 0-based step `step` of a run seeded `run_seed` (see the module)."""
    return ((_check("seed", run_seed, RUN_BITS) << STEP_BITS | _check("step", step, STEP_BITS)) << REQUEST_BITS
            | _check("request", request, REQUEST_BITS))


def branch_request(turn: int, group: int, branch: int) -> int:
    """The request index of turn `turn` of branch `branch` of group `group` in a multi-turn step."""
    return ((_check("turn", turn, TURN_BITS) << GROUP_BITS | _check("group", group, GROUP_BITS)) << BRANCH_BITS
            | _check("branch", branch, BRANCH_BITS))
