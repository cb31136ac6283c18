"""Time to verify Llama-shaped tensor-parallel stacks (forward), TP=8.

Prints one line per (layers, hidden): ops, seconds, verdict.  Verification runs on reduced
shapes, so the time should not depend on the hidden size.

    python benchmarks/bench_verify.py [--layers 1 8 32] [--hidden 1024 16384]
"""
from __future__ import annotations

import argparse
import time

from verifier.check import check_program
from verifier.stacks import StackShape, llama_stack_vir
from verifier.text_format import parse_program


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--hidden", type=int, nargs="+", default=[1024, 16384])
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--backward", action="store_true", help="also check every gradient")
    args = parser.parse_args()
    print(f"{'layers':>6} {'hidden':>6} {'ops':>6} {'seconds':>8}  verdict" + ("  (forward+backward)" if args.backward
                                                                              else "  (forward)"))
    for hidden in args.hidden:
        for layers in args.layers:
            shape = StackShape(layers=layers, tp=args.tp, hidden=hidden, ffn=4 * hidden)
            program = parse_program(llama_stack_vir(shape, backward=args.backward))
            started = time.perf_counter()
            report = check_program(program)
            seconds = time.perf_counter() - started
            ops = len(program.ops) + report.extra.get("backward_ops", 0)
            print(f"{layers:>6} {hidden:>6} {ops:>6} {seconds:>8.2f}  {report.verdict}", flush=True)


if __name__ == "__main__":
    main()
