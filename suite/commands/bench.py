"""``qconform bench``: what a nightly pays for, measured side by side on this machine.

Three parts (all by default; docs/performance.md says what each figure means):

* ``--golden``: golden compute vs LiteRT ``tflite-ref`` invoke per op at realistic sizes,
  single-threaded, in one process, bit-exactness checked (benchmarks/golden.py);
* ``--throughput``: cases per second per target with batching off and on, on the default
  case set, and the share of that time spent in the runtime's own invoke
  (benchmarks/throughput.py);
* ``--suite``: the wall time of the default run (``pytest --target=tflite,tflite-ref,ort,htp``)
  with cold caches (QNN context, goldens, case set, analyses) and three times warm, then once
  warm with ``--pipeline off``, and each run's harness share (benchmarks/suite_run.py).

The benchmarks live in the source checkout (``benchmarks/``), not in the installed package,
and are not part of the default test run.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from suite.core.errors import QconformError

ROOT = Path(__file__).resolve().parents[2]


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks: golden vs tflite-ref, cases/s per target (batching "
                                     "on/off), default-run wall time and harness share",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--golden", action="store_true", help="golden vs tflite-ref time per op")
    p.add_argument("--throughput", action="store_true", help="cases/s per target, batching off and on")
    p.add_argument("--suite", action="store_true", help="wall time and harness share of the default run")
    p.add_argument("--ops", default=None, metavar="OP[,OP]",
                   help="golden: these ops (default: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, "
                        "BATCH_MATMUL, AVERAGE_POOL_2D, SOFTMAX, MEAN); throughput/suite: these ops only")
    p.add_argument("--golden-scale", type=int, default=1, metavar="N",
                   help="divide the realistic golden sizes by N (smoke tests; default 1)")
    p.add_argument("--repeats", type=int, default=15, metavar="N", help="golden: timed rounds (default 15)")
    p.add_argument("--cases-per-op", type=int, default=30, metavar="N",
                   help="throughput/suite: generated cases per op (default 30, the default run's)")
    p.add_argument("--targets", default="tflite,tflite-ref,ort,htp", metavar="NAME[,NAME]",
                   help="throughput/suite targets (default tflite,tflite-ref,ort,htp)")
    p.add_argument("--batch-size", type=int, default=64, metavar="N", help="batching on: cases per run() (64)")
    p.add_argument("--warm-runs", type=int, default=3, metavar="N",
                   help="suite: runs with warm caches after the cold one (default 3)")
    p.add_argument("--workers", default="0", metavar="N[,N]",
                   help="suite: pytest-xdist worker counts to run (default 0; e.g. 0,2)")
    p.add_argument("--suite-unbatched", action="store_true",
                   help="suite: also run it with --batch-size 1 and no QNN context cache (slow)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write every figure as JSON")
    p.set_defaults(func=main)


def _benchmarks():
    if str(ROOT) not in sys.path and (ROOT / "benchmarks").is_dir():
        sys.path.insert(0, str(ROOT))
    try:
        import benchmarks  # noqa: F401
    except ImportError:
        raise QconformError("the benchmarks live in the source checkout (benchmarks/); run `qconform bench` "
                            "from a checkout of the suite", field="bench") from None


def _ints(text: str, name: str) -> list[int]:
    try:
        vals = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise QconformError(f"must be a comma list of integers (got {text!r})", field=name) from None
    if any(v < 0 for v in vals):
        raise QconformError(f"must be >= 0 (got {text!r})", field=name)
    return vals


def main(args) -> int:
    _benchmarks()
    from benchmarks import golden, suite_run, throughput
    parts = [k for k in ("golden", "throughput", "suite") if getattr(args, k)] or ["golden", "throughput", "suite"]
    ops = [x.strip() for x in args.ops.split(",") if x.strip()] if args.ops else None
    if (args.golden_scale < 1 or args.repeats < 1 or args.cases_per_op < 1 or args.batch_size < 1
            or args.warm_runs < 1):
        raise QconformError("--golden-scale, --repeats, --cases-per-op, --batch-size and --warm-runs must be >= 1",
                            field="bench")
    workers = _ints(args.workers, "--workers")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    out: dict = {"format": "qconform-bench/1", "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    from reports.runinfo import host_info
    out["host"] = host_info()
    print(f"qconform bench on {out['host'].get('cpu_model')} x {out['host'].get('cpu_count')} "
          f"(numpy {out['host'].get('numpy')}, python {out['host'].get('python')})", flush=True)

    if "golden" in parts:
        from benchmarks.cases import OPS
        gops = [o for o in ops if o in OPS] if ops else None   # --ops: only those with a benchmark case
        print("\n== golden vs tflite-ref (one case per op, single-threaded, median of interleaved rounds)",
              flush=True)
        if ops and len(gops) < len(ops):
            print(f"  no golden benchmark case for {', '.join(o for o in ops if o not in OPS)} "
                  f"(cases: {', '.join(OPS)})", flush=True)
        rows = golden.run(gops, scale=args.golden_scale, repeats=args.repeats) if gops != [] else []
        if rows:
            print(golden.table(rows), flush=True)
            from reference import native
            from reference.ops.conv import _FC_NATIVE_MAX
            out["golden_native_dot"] = native.status()
            print(f"  golden's C int8 dot (FULLY_CONNECTED, up to {_FC_NATIVE_MAX} rows): "
                  f"{out['golden_native_dot']}", flush=True)
        out["golden"] = [r.as_dict() for r in rows]

    if "throughput" in parts:
        print(f"\n== cases per second per target, default case set ({args.cases_per_op} per op), "
              f"in-process, no pytest/golden/isolation", flush=True)
        rows = throughput.run(targets, args.cases_per_op, batch_size=args.batch_size, ops=ops,
                              log=lambda s: print(s, flush=True))
        print(throughput.table(rows), flush=True)
        out["throughput"] = [r.as_dict() for r in rows]

    if "suite" in parts:
        print(f"\n== the default run: pytest --target={','.join(targets)} (wall from outside; harness share "
              f"from its timing.json)", flush=True)
        rows = []
        cpo = args.cases_per_op if args.cases_per_op != 30 else None
        for n in workers:
            with tempfile.TemporaryDirectory(prefix="qconform-bench-cache-") as cache:
                # cold: fresh QNN context, golden, case-set and analysis caches; warm: --warm-runs runs
                # on them (a nightly on the same machine), as the figures of one run vary by 10-20%
                w = args.warm_runs
                for label in ["cold caches"] + [f"warm caches, {i}/{w}" for i in range(1, w + 1)]:
                    r = suite_run.run_suite(f"batched, {label}", ",".join(targets), n, cpo, ops, cache)
                    print(f"  {r.label:<28} -n {n}: {r.wall_s:.1f} s, harness {r.harness_pct}%", flush=True)
                    rows.append(r)
                if n == 0:   # side by side: the same warm run, each batch only when its first test asks
                    r = suite_run.run_suite("batched, warm, pipeline off", ",".join(targets), n, cpo, ops, cache,
                                            extra=["--pipeline", "off"])
                    print(f"  {r.label:<28} -n {n}: {r.wall_s:.1f} s, harness {r.harness_pct}%", flush=True)
                    rows.append(r)
        if args.suite_unbatched:
            r = suite_run.run_suite("unbatched, no QNN cache", ",".join(targets), 0, cpo, ops, "off",
                                    extra=["--batch-size", "1"])
            print(f"  {r.label:<28} -n 0: {r.wall_s:.1f} s, harness {r.harness_pct}%", flush=True)
            rows.append(r)
        print(suite_run.table(rows), flush=True)
        for r in rows:
            if r.timing:
                from suite.harness.timing import lines
                print(f"\n  {r.label}, -n {r.workers}:")
                for ln in lines(r.timing):
                    print("  " + ln)
        out["suite"] = [r.as_dict() for r in rows]

    if args.json:
        try:
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        except OSError as e:
            raise QconformError(f"cannot write {args.json}: {e.strerror}", field="--json") from None
        print(f"\nwritten: {args.json}")
    return 0
