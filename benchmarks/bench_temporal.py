"""Time the temporal checks at pipeline scale: 1F1B with 16 stages x 64 microbatches.

Prints seconds for generating the schedule and for checking it (schedule semantics,
message matching, async handles and the deadlock simulation); the goal is under 2 s on
two cores.  Also times an IR program on a 512-rank dp x tp mesh, to show the per-rank
projection stays linear in ranks x ops.

    python benchmarks/bench_temporal.py
"""
from __future__ import annotations

import time

from verifier.ir import Mesh, Op, Program, Span
from verifier.temporal import analyse_program, analyse_schedule, interleaved_1f1b, one_f_one_b


def timed(label: str, run):
    start = time.perf_counter()
    result = run()
    print(f"{label}: {time.perf_counter() - start:.3f} s")
    return result


def layered_program(layers: int, dp: int, tp: int) -> Program:
    """Per layer: matmul, async tp all-reduce, wait, blocking dp all-reduce."""
    ops = []
    for layer in range(layers):
        line = 10 * layer
        ops += [Op((f"h{layer}",), "matmul", ("x", "w"), {}, Span(line + 1)),
                Op((f"y{layer}",), "all_reduce", (f"h{layer}",), {"mesh_dim": "tp", "handle": f"w{layer}"},
                   Span(line + 2)),
                Op((), "wait", (), {"handle": f"w{layer}"}, Span(line + 3)),
                Op((f"g{layer}",), "all_reduce", (f"y{layer}",), {"mesh_dim": "dp"}, Span(line + 4))]
    return Program(Mesh((("dp", dp), ("tp", tp))), (), tuple(ops), ())


def main() -> None:
    schedule = timed("generate 1F1B 16 stages x 64 microbatches", lambda: one_f_one_b(16, 64))
    result = timed("check 1F1B 16 x 64 (order, matching, deadlock)", lambda: analyse_schedule(schedule))
    assert result.ok, result.diagnostics
    print(f"  {result.events} events; proven: {len(result.proven)} properties")
    interleaved = interleaved_1f1b(16, 64, 4)
    result = timed("check interleaved 1F1B 16 x 64 x 4 chunks", lambda: analyse_schedule(interleaved))
    assert result.ok, result.diagnostics
    print(f"  {result.events} events")
    program = layered_program(32, 64, 8)
    result = timed("check IR program, 32 layers on dp=64 x tp=8", lambda: analyse_program(program))
    assert result.ok, result.diagnostics
    print(f"  {result.events} events")


if __name__ == "__main__":
    main()
