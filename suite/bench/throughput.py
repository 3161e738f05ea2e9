"""Cases per second per target, batching off and on, on the default case set.

Each target runs the generated cases (every op with a generator, ``--cases-per-op`` each) in
this process, without pytest, golden or isolation, so the figure is the target's own cost:

* ``off``: one case per ``run()`` call, i.e. one model and one session per case (htp with
  the QNN context cache off): what the suite did before batching (``--batch-size 1``);
* ``on``: the cases of one op in ``run()`` calls of ``batch_size`` (the runner's batches);
  htp twice, with a fresh context cache (``on, cold cache``: every context compiled) and
  again with a new target instance on the same cache (``on, warm cache``: a second run).

``invoke %`` is the share of that wall time the runtime spent in its own invoke calls (the
targets' ``info["invoke_s"]``); the rest is model building, sessions, data conversion.
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass

from suite.bench.timing import quiet_native_output
from suite.cases.generate import generate, generator_ops
from suite.cases.hunt import params
from suite.core.findings import match
from suite.harness.run import group_parts
from targets import get_target
from targets.base import Timing, run_in_parts
from targets.batching import CACHED_TARGETS


@dataclass
class ThroughputRow:
    target: str
    mode: str
    cases: int
    wall_s: float
    cases_per_s: float
    invoke_s: float
    invoke_pct: float
    sessions: int | None = None
    cache_hits: int | None = None
    statuses: dict | None = None

    def as_dict(self):
        return asdict(self)


def default_cases(cases_per_op: int = 30, seed: int = 0, ops: list[str] | None = None):
    known = generator_ops()
    return generate([op for op in (ops or known) if op in known], cases_per_op, seed)


def _parts(cases: list, target, batch_size: int, latency_cases: int | None) -> list[tuple[list, int]]:
    """(cases, alone) of each ``run_in_parts`` call: batches of ``batch_size``; with ``latency_cases``,
    as a run plans a group (suite/harness/run.py ``group_parts``)."""
    if latency_cases is None:
        step = max(1, batch_size)
        return [(cases[i:i + step], 0) for i in range(0, len(cases), step)]
    return group_parts(cases, target, latency_cases, batch_size)


def _measure(target_name: str, mode: str, target, cases, batch_size: int, timing,
             latency_cases: int | None = None) -> ThroughputRow:
    by_op = defaultdict(list)
    for c in cases:
        # in process (no isolation here): leave out cases known to crash this target's runtime
        if match(c.op, target_name, c.variant, "crash", params(c)) is None:
            by_op[c.op].append(c)
    cases = [c for cs in by_op.values() for c in cs]
    outs = []
    with quiet_native_output():   # the runtimes' own logs of refused models
        t0 = time.perf_counter()
        for cs in by_op.values():
            for part, alone in _parts(cs, target, batch_size, latency_cases):
                outs.extend(run_in_parts(target, part, timing, alone))
        wall = time.perf_counter() - t0
    inv = sum(float(o.info.get("invoke_s", sum(o.latency_us or ()) / 1e6)) for o in outs)
    st = getattr(target, "batch_stats", None)
    statuses = defaultdict(int)
    for o in outs:
        statuses[o.status] += 1
    return ThroughputRow(target_name, mode, len(cases), round(wall, 3), round(len(cases) / wall, 1),
                         round(inv, 3), round(100 * inv / wall, 2) if wall else 0.0,
                         st.sessions if st is not None else None, st.cache_hits if st is not None else None,
                         dict(statuses))


#: targets with a cache of compiled models (option cache_dir): measured with it off, cold and warm
CACHED = CACHED_TARGETS


def run(targets: list[str] | None = None, cases_per_op: int = 30, seed: int = 0, batch_size: int = 64,
        ops: list[str] | None = None, warmup: int = 1, repeats: int = 5,
        modes: tuple[str, ...] = ("off", "on"), log=None, latency_cases: int | None = None) -> list[ThroughputRow]:
    """``latency_cases``: "on" plans each op's cases as the run does (that many alone first, in
    case-id order), not only in batches."""
    cases = default_cases(cases_per_op, seed, ops)
    timing = Timing(warmup=warmup, repeats=repeats)
    rows = []
    for name in targets or ["tflite", "tflite-ref", "ort", "htp"]:
        probe = get_target(name)
        with quiet_native_output():   # registering QNN prints a line
            ok, why = probe.availability()
        if not ok:
            if log:
                log(f"  {name}: unavailable ({why})")
            continue
        for mode in modes:
            before = len(rows)
            if mode == "off":
                t = get_target(name, **({"cache_dir": "off"} if name in CACHED else {}))
                rows.append(_measure(name, "off (1 case/session)", t, cases, 1, timing))
                t.close()
            elif name in CACHED:
                with tempfile.TemporaryDirectory(prefix=f"qconform-bench-{name}-") as d:
                    for label in ("on, cold cache", "on, warm cache"):
                        t = get_target(name, cache_dir=d)
                        rows.append(_measure(name, label, t, cases, batch_size, timing, latency_cases))
                        t.close()
            else:
                t = get_target(name)
                rows.append(_measure(name, "on", t, cases, batch_size, timing, latency_cases))
                t.close()
            for r in rows[before:] if log else []:
                log(f"  {r.target:<11} {r.mode:<22} {r.cases_per_s:>9.1f} cases/s")
    return rows


def table(rows: list[ThroughputRow]) -> str:
    head = (f"{'target':<11} {'batching':<22} {'cases':>6} {'wall s':>8} {'cases/s':>9} {'x off':>7} "
            f"{'invoke %':>9} {'sessions':>9}")
    lines = [head, "-" * len(head)]
    off = {r.target: r.cases_per_s for r in rows if r.mode.startswith("off")}
    for r in rows:
        base = off.get(r.target)
        speed = f"{r.cases_per_s / base:.1f}" if base else "-"
        sess = "" if r.sessions is None else str(r.sessions)
        lines.append(f"{r.target:<11} {r.mode:<22} {r.cases:>6} {r.wall_s:>8.2f} {r.cases_per_s:>9.1f} "
                     f"{speed:>7} {r.invoke_pct:>9.2f} {sess:>9}")
    return "\n".join(lines)
