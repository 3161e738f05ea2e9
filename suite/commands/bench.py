"""``qconform bench``: what a nightly pays for, measured side by side on this machine.

Three parts (all by default; docs/performance.md says what each figure means):

* ``--golden``: golden compute vs LiteRT ``tflite-ref`` invoke per op at realistic sizes,
  single-threaded, in one process, bit-exactness checked (suite/bench/golden.py);
* ``--throughput``: cases per second per target with batching off and on, on the default
  case set, and the share of that time spent in the runtime's own invoke
  (suite/bench/throughput.py);
* ``--suite``: the wall time of the default run (plain ``pytest``: every available default
  target) once on fresh caches, then ``--warm-runs`` interleaved rounds of it and of it without
  each mechanism: ``--ahead 0``, ``--golden-cache off``, no golden memo; the median of each and
  its change against the default run (suite/bench/suite_run.py, suite/bench/no_memo.py).

The benchmarks are in the package (``suite/bench/``) and not part of the default test run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from reference import native
from reference.ops.conv import _FC_NATIVE_MAX
from reports.runinfo import host_info
from suite.bench import golden, suite_run, throughput
from suite.bench.cases import OPS
from suite.core.errors import QconformError
from suite.harness.options import MAX_CASES_PER_OP, MAX_REPEATS
from targets import DEFAULT_TARGETS
from targets.device_runner import isa_flags

THROUGHPUT_TARGETS = ["tflite", "tflite-ref", "ort", "htp"]
CASES_PER_OP = 30   # the default run's


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks: golden vs tflite-ref, cases/s per target (batching "
                                     "on/off), the default run's wall time and each mechanism's share of it",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--golden", action="store_true", help="golden vs tflite-ref time per op")
    p.add_argument("--throughput", action="store_true", help="cases/s per target, batching off and on")
    p.add_argument("--suite", action="store_true",
                   help="the default run's wall time, and without --ahead, the golden store, the golden memo")
    p.add_argument("--ops", default=None, metavar="OP[,OP]",
                   help="golden: these ops (default: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, "
                        "BATCH_MATMUL, AVERAGE_POOL_2D, SOFTMAX, MEAN); throughput/suite: these ops only")
    p.add_argument("--golden-scale", type=int, default=1, metavar="N",
                   help="divide the realistic golden sizes by N (smoke tests; default 1)")
    p.add_argument("--repeats", type=int, default=15, metavar="N", help="golden: timed rounds (default 15)")
    p.add_argument("--cases-per-op", type=int, default=None, metavar="N",
                   help=f"throughput/suite: generated cases per op (default {CASES_PER_OP}, the default run's)")
    p.add_argument("--targets", default=None, metavar="NAME[,NAME]",
                   help=f"throughput: targets (default {','.join(THROUGHPUT_TARGETS)}); suite: --target of "
                        f"each run (default none: every available default target, as plain pytest)")
    p.add_argument("--batch-size", type=int, default=64, metavar="N",
                   help="throughput: cases per run() with batching on (default 64)")
    p.add_argument("--warm-runs", type=int, default=3, metavar="N",
                   help="suite: interleaved rounds of every variant after the cold run (default 3)")
    p.add_argument("--workers", type=int, default=0, metavar="N",
                   help="suite: run each pytest with -n N (pytest-xdist; default 0: no -n)")
    p.add_argument("--suite-variants", default=None, metavar="LABEL[;LABEL]",
                   help="suite: only these variants besides default (';'-separated labels as the table "
                        "prints them, e.g. '--item=case;--ahead 0'); default: every variant")
    p.add_argument("--own-rounds", type=int, default=2, metavar="N",
                   help="suite: rounds of the targets' own time, each target's least kept (default 2)")
    p.add_argument("--suite-unbatched", action="store_true",
                   help="suite: also a variant with --batch-size 1 and no QNN context cache (slow)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write every figure as JSON")
    p.set_defaults(func=main)


def main(args) -> int:
    parts = [k for k in ("golden", "throughput", "suite") if getattr(args, k)] or ["golden", "throughput", "suite"]
    ops = [x.strip() for x in args.ops.split(",") if x.strip()] if args.ops else None
    if (args.golden_scale < 1 or args.repeats < 1 or args.batch_size < 1 or args.warm_runs < 1
            or not 1 <= args.own_rounds <= 100 or (args.cases_per_op is not None and args.cases_per_op < 1)):
        raise QconformError("--golden-scale, --repeats, --cases-per-op, --batch-size, --warm-runs and --own-rounds "
                            "must be >= 1 (--own-rounds at most 100)", field="bench")
    if args.repeats > MAX_REPEATS or (args.cases_per_op or 0) > MAX_CASES_PER_OP:
        raise QconformError(f"--repeats at most {MAX_REPEATS:,}, --cases-per-op at most {MAX_CASES_PER_OP:,} "
                            f"(got {args.repeats:,}, {args.cases_per_op or 0:,})", field="bench",
                            rule="the bounds of a run")
    if args.workers < 0:
        raise QconformError(f"must be >= 0 (got {args.workers})", field="--workers")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()] if args.targets else None
    out: dict = {"format": "qconform-bench/2", "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    out["host"] = host_info(isa_flags())
    out["load_before"] = list(os.getloadavg())
    print(f"qconform bench on {out['host'].get('cpu_model')} x {out['host'].get('cpu_count')} "
          f"(numpy {out['host'].get('numpy')}, python {out['host'].get('python')}), load average "
          f"{_load(out['load_before'])}", flush=True)

    if "golden" in parts:
        gops = [o for o in ops if o in OPS] if ops else None   # --ops: only those with a benchmark case
        print("\n== golden vs tflite-ref (one case per op, single-threaded, median of interleaved rounds)",
              flush=True)
        if ops and len(gops) < len(ops):
            print(f"  no golden benchmark case for {', '.join(o for o in ops if o not in OPS)} "
                  f"(cases: {', '.join(OPS)})", flush=True)
        rows = golden.run(gops, scale=args.golden_scale, repeats=args.repeats) if gops != [] else []
        if rows:
            print(golden.table(rows), flush=True)
            out["golden_native_dot"] = native.status()
            print(f"  golden's C int8 dot (FULLY_CONNECTED, up to {_FC_NATIVE_MAX} rows): "
                  f"{out['golden_native_dot']}", flush=True)
        out["golden"] = [r.as_dict() for r in rows]

    if "throughput" in parts:
        cpo = args.cases_per_op or CASES_PER_OP
        print(f"\n== cases per second per target, default case set ({cpo} per op), "
              f"in-process, no pytest/golden/isolation", flush=True)
        rows = throughput.run(targets or THROUGHPUT_TARGETS, cpo, batch_size=args.batch_size, ops=ops,
                              log=lambda s: print(s, flush=True))
        print(throughput.table(rows), flush=True)
        out["throughput"] = [r.as_dict() for r in rows]

    if "suite" in parts:
        _suite(args, targets, ops, out)

    out["load_after"] = list(os.getloadavg())
    print(f"\nload average at the end: {_load(out['load_after'])}", flush=True)
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        except OSError as e:
            raise QconformError(f"cannot write {args.json}: {e.strerror}", field="--json") from None
        print(f"written: {args.json}")
    return 0


def _suite(args, targets: list[str] | None, ops: list[str] | None, out: dict) -> None:
    what = f"pytest --target={','.join(targets)}" if targets else "pytest (every available default target)"
    extra = "".join([f" -n {args.workers}" if args.workers else "",
                     f" --cases-per-op {args.cases_per_op}" if args.cases_per_op else "",
                     f" --ops {','.join(ops)}" if ops else ""])
    print(f"\n== the default run: {what}{extra}; cold once, then {args.warm_runs} interleaved round(s) of each "
          f"variant on warm caches (wall from outside)", flush=True)
    only = [x.strip() for x in args.suite_variants.split(";") if x.strip()] if args.suite_variants is not None else None
    try:
        rows = suite_run.run_variants(",".join(targets) if targets else None, args.workers, args.cases_per_op, ops,
                                      args.warm_runs, args.suite_unbatched, log=lambda s: print(s, flush=True),
                                      only=only)
    except ValueError as e:
        raise QconformError(str(e), field="--suite-variants") from None
    print(suite_run.table(rows), flush=True)
    bad = suite_run.mismatches(rows)
    if bad:
        print("\n" + "!" * 78 + "\n!!! WARNING: the runs' outcomes differ: the figures do not compare like with like\n"
              + "\n".join(f"!!!   {b}" for b in bad) + "\n" + "!" * 78, flush=True)
    names = targets or list(DEFAULT_TARGETS)
    print("\n== the targets' own time for the same cases (in-process, no pytest/golden/isolation): every case "
          "in batches, then as the run plans them (the first 3 of each group alone, for their latency); each "
          f"target's least time of {args.own_rounds} round(s)", flush=True)
    own = suite_run.own_time(names, args.cases_per_op, ops, args.batch_size, log=lambda s: print(s, flush=True),
                             rounds=args.own_rounds)
    planned = suite_run.own_time(names, args.cases_per_op, ops, args.batch_size, log=lambda s: print(s, flush=True),
                                 latency_cases=3, rounds=args.own_rounds)
    ratio, ratio_planned = suite_run.ratios(rows, own), suite_run.ratios(rows, planned)
    for what, t, r in (("batched", own, ratio), ("as the run plans them", planned, ratio_planned)):
        print(f"  targets' own time, {what}: {sum(t.values()):.2f} s (" + ", ".join(f"{n} {s:.2f}" for n, s in t.items())
              + ")\n" + "\n".join(f"  {label:<30} wall / own time {x:.2f}x" for label, x in r.items()), flush=True)
    out["suite"] = {"default_command": ["python"] + rows[0].runs[0].command,
                    "outcomes_identical": not bad, "mismatches": bad,
                    "variants": [r.as_dict() for r in rows], "own_s": own, "wall_over_own": ratio,
                    "own_planned_s": planned, "wall_over_own_planned": ratio_planned}


def _load(avg) -> str:
    return " ".join(f"{x:.2f}" for x in avg)
