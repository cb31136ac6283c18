"""Ground truth for every real-world gallery driver: 1 rank against 2 and 4 gloo ranks.

    python benchmarks/groundtruth_realworld.py [--world 2 --world 4] [FILES...]

Prints one row per driver and world size (expected verdict, what the real run did, the
largest difference, seconds) and a final count of rows that agree with expected.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from groundtruth import realworld_runner as rw  # noqa: E402

GALLERY = ROOT / "examples" / "realworld"


def agrees(info: dict, res) -> bool:
    if info["verdict"] == "verified":
        return res.status == rw.STATUS_MATCH
    if info.get("witness") == "timeout":
        return res.status == rw.STATUS_TIMEOUT
    if info.get("witness") == "backward":
        return res.status == rw.STATUS_MISMATCH and rw.forward_matches(res)
    return res.status in (rw.STATUS_MISMATCH, rw.STATUS_ERROR) and not rw.forward_matches(res)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--world", type=int, action="append")
    args = ap.parse_args()
    expected = json.loads((GALLERY / "expected.json").read_text())
    names = [Path(f).name for f in args.files] or sorted(expected)
    jobs = []
    for name in names:
        hangs = expected[name].get("witness") == "timeout"
        spec = rw.Spec(str(GALLERY / name), timeout=8.0 if hangs else 60.0, expect_hang=hangs)
        jobs += [rw.Job(spec, w) for w in (args.world or [2, 4])]
    started = time.perf_counter()
    results = rw.run_jobs(jobs)
    wall = time.perf_counter() - started
    ok = 0
    print(f"{'driver':<52} {'N':>2} {'expected':<11} {'real run':<17} {'max|diff|':>10} {'s':>6}  agrees")
    for job, res in zip(jobs, results):
        name = Path(job.spec.path).name
        good = agrees(expected[name], res)
        ok += good
        print(f"{name:<52} {job.world:>2} {expected[name]['verdict']:<11} {res.status:<17} "
              f"{res.max_abs_diff:>10.3g} {res.seconds:>6.2f}  {'yes' if good else 'NO'}")
    print(f"{ok}/{len(results)} runs agree with expected.json "
          f"({len(names)} drivers, worlds {sorted({j.world for j in jobs})}); wall {wall:.0f}s")
    return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
