"""The default run's wall time, and what each mechanism of the harness saves of it, side by side.

The default run is plain ``pytest`` in the checkout: ``python -m pytest -q -p no:cacheprovider
--report-dir=<tmp>`` (every available default target; ``targets`` gives ``--target``), with the
QNN context cache and the golden store in this bench's temporary folder (``--cache-dir``,
``--golden-cache``), and the golden's C build and the user key there too
(``$QCONFORM_NATIVE_DIR``, ``$QCONFORM_KEY_FILE``), so the user's ``~/.cache`` is not touched.

:func:`run_variants` runs it once on fresh caches (``cold``), then ``warm_runs`` rounds of every
variant one after the other (A B C D, A B C D, ...), so a load spike on a shared machine hits
every variant alike, all on the caches the cold run filled (a nightly on the same machine):

* ``default``: the default run (one pytest item per (op, target): suite/harness/items.py);
* ``--item=case``: one pytest item per (case, target) instead; its pytest counts differ (items),
  its run.json counts must not;
* ``--ahead 0``: each batch reaches its target's worker only when its first test asks
  (suite/harness/isolation.py), instead of ``--ahead 4`` batches queued before;
* ``--golden-cache off``: no golden store, every golden computed in the run;
* ``no golden memo``: the judge keeps no case's goldens between its targets
  (:mod:`suite.bench.no_memo`, loaded with ``-p``); the store as in the default run;
* ``--batch-size 1, no QNN cache`` (``unbatched=True`` only): no batching, no context cache.

Each run's wall time is measured from outside (interpreter start-up included); each row gives
the median, min and max over its runs and the median's change against ``default``. Every
run's outcome line (pytest's counts, its duration left out) and the run's own counts
(run.json) must be the same for all variants: the variants change the cost, never a verdict.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from reports.runinfo import read_run_info
from suite.bench import throughput

#: the project's checkout (pyproject.toml): the default run is ``pytest`` there
ROOT = Path(__file__).resolve().parents[2]
NO_MEMO_PLUGIN = "suite.bench.no_memo"


@dataclass(frozen=True)
class Variant:
    label: str
    args: tuple[str, ...] = ()   # pytest arguments added to the default run's
    golden_cache: bool = True    # False: --golden-cache=off instead of the bench's store
    qnn_cache: bool = True       # False: --cache-dir=off instead of the bench's cache
    golden_fresh: bool = False   # True: an empty golden store of its own (the goldens computed in the run)
    versus: str = "default"      # the variant whose median its % is measured against


DEFAULT = Variant("default")
GOLDENS_COLD = Variant("goldens cold", golden_fresh=True)
ITEM_CASE = Variant("--item=case", ("--item", "case"))
VARIANTS = (
    DEFAULT,
    ITEM_CASE,
    Variant("--ahead 0", ("--ahead", "0")),
    Variant("--golden-cache off", golden_cache=False),
    Variant("no golden memo", ("-p", NO_MEMO_PLUGIN)),
    GOLDENS_COLD,
    Variant("goldens cold, no golden memo", ("-p", NO_MEMO_PLUGIN), golden_fresh=True, versus=GOLDENS_COLD.label),
)
UNBATCHED = Variant("--batch-size 1, no QNN cache", ("--batch-size", "1"), qnn_cache=False)
COLD = "cold"


@dataclass
class RunResult:
    """One pytest run."""
    label: str
    wall_s: float                  # from outside: interpreter start to exit
    exit_status: int
    outcome: str                   # pytest's last line without its duration, e.g. "7107 passed, 1 failed"
    counts: dict | None            # run.json counts {status: n}
    cost: dict | None              # run.json cost (its own wall_s: started to finished, in seconds)
    command: list[str]
    load: float                    # 1-minute load average when the run started

    def as_dict(self):
        return asdict(self)


@dataclass
class VariantRow:
    """A variant's runs and their figures."""
    label: str
    args: list[str]
    runs: list[RunResult] = field(default_factory=list)
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    pct_vs_default: float | None = None   # (median - its baseline's median) / the baseline's, in % (the
                                          # baseline: "default", or the variant's own ``versus``)
    outcome: str = ""
    in_run_s: float | None = None          # median of run.json's cost.wall_s (whole seconds)

    def as_dict(self):
        d = asdict(self)
        d["walls_s"] = [r.wall_s for r in self.runs]
        return d


_DURATION = re.compile(r"\s+in\s+[0-9.]+s(\s+\([0-9:.]+\))?\s*$")
_COUNTS = re.compile(r"\b\d+ (passed|failed|skipped|xfailed|xpassed|errors?|warnings?|deselected)\b")


def outcome_line(stdout: str) -> str:
    """pytest's final counts line (``1 failed, 7107 passed, ... in 17.66s``) without its duration;
    the last line of output if there is none."""
    for ln in reversed(stdout.splitlines()):
        s = ln.strip().strip("=").strip()
        if _COUNTS.search(s) and _DURATION.search(s):
            return _DURATION.sub("", s)
    lines = stdout.strip().splitlines()
    return lines[-1].strip() if lines else "?"


def command(variant: Variant, cache: Path, report: Path, targets: str | None = None, workers: int = 0,
            cases_per_op: int | None = None, ops: list[str] | None = None) -> list[str]:
    golden = (report / "golden") if variant.golden_fresh else (cache / "golden")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--report-dir={report}",
           f"--cache-dir={cache / 'qnn' if variant.qnn_cache else 'off'}",
           f"--golden-cache={golden if variant.golden_cache else 'off'}"]
    if targets:
        cmd.append(f"--target={targets}")
    if workers:
        cmd += ["-n", str(workers)]
    if cases_per_op is not None:
        cmd += ["--cases-per-op", str(cases_per_op)]
    if ops:
        cmd += ["--ops", ",".join(ops)]
    return cmd + list(variant.args)


def bench_env(cache: Path) -> dict[str, str]:
    """The environment of each run: the golden's C build and the user key in the bench's folder."""
    env = dict(os.environ, QCONFORM_NATIVE_DIR=str(cache / "native"), QCONFORM_KEY_FILE=str(cache / "key"))
    for k in ("QCONFORM_CACHE_DIR", "QCONFORM_GOLDEN_CACHE"):   # the options given win anyway
        env.pop(k, None)
    return env


def run_once(label: str, cmd: list[str], env: dict[str, str], report: Path, timeout: float = 3600) -> RunResult:
    cwd = ROOT if (ROOT / "pyproject.toml").is_file() else Path.cwd()
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.perf_counter() - t0
    info = None
    for run_json in sorted(report.glob("runs/*/run.json")):
        info = read_run_info(run_json.parent)
    return RunResult(label, round(wall, 3), p.returncode, outcome_line(p.stdout),
                     (info or {}).get("counts"), (info or {}).get("cost"), cmd[1:], round(load, 2))


def _median(xs):
    return round(float(statistics.median(xs)), 3) if xs else None


def run_variants(targets: str | None = None, workers: int = 0, cases_per_op: int | None = None,
                 ops: list[str] | None = None, warm_runs: int = 3, unbatched: bool = False,
                 log=None, timeout: float = 3600, only: list[str] | None = None) -> list[VariantRow]:
    """The cold run, then ``warm_runs`` interleaved rounds of every variant (see the module);
    ``only``: these variants' labels (``default`` always, and a variant's baseline)."""
    variants = list(VARIANTS) + ([UNBATCHED] if unbatched else [])
    if only is not None:
        keep = {DEFAULT.label, *only}
        keep |= {v.versus for v in variants if v.label in keep}
        unknown = set(only) - {v.label for v in variants}
        if unknown:
            raise ValueError(f"unknown variant(s) {sorted(unknown)}; known: {[v.label for v in variants]}")
        variants = [v for v in variants if v.label in keep]
    with tempfile.TemporaryDirectory(prefix="qconform-bench-suite-") as tmp:
        cache = Path(tmp) / "cache"
        env = bench_env(cache)
        n = 0

        def one(label: str, variant: Variant) -> RunResult:
            nonlocal n
            n += 1
            report = Path(tmp) / f"report-{n}"
            r = run_once(label, command(variant, cache, report, targets, workers, cases_per_op, ops), env, report,
                         timeout)
            if log:
                log(f"  {label:<30} {r.wall_s:>8.1f} s  (load {r.load:.2f})  {r.outcome}")
            return r

        rows = {COLD: VariantRow(COLD, [], [one(COLD, DEFAULT)])}
        rows.update({v.label: VariantRow(v.label, _variant_args(v)) for v in variants})
        for i in range(warm_runs):
            for v in variants:
                rows[v.label].runs.append(one(f"{v.label} ({i + 1}/{warm_runs})", v))
    for row in rows.values():
        walls = [r.wall_s for r in row.runs]
        row.median_s, row.min_s, row.max_s = _median(walls), min(walls), max(walls)
        row.outcome = row.runs[0].outcome
        row.in_run_s = _median([r.cost["wall_s"] for r in row.runs if r.cost and r.cost.get("wall_s") is not None])
    versus = {v.label: v.versus for v in variants}
    for label, row in rows.items():
        base = rows[versus.get(label, DEFAULT.label)].median_s
        if base:
            row.pct_vs_default = round(100.0 * (row.median_s - base) / base, 1)
    return [rows[COLD]] + [rows[v.label] for v in variants]


def _variant_args(v: Variant) -> list[str]:
    return ([] if v.qnn_cache else ["--cache-dir=off"]) + ([] if v.golden_cache else ["--golden-cache=off"]) \
        + (["--golden-cache=<an empty folder>"] if v.golden_fresh else []) + list(v.args)


def mismatches(rows: list[VariantRow]) -> list[str]:
    """Why the runs are not alike (empty when every run has the same outcome line, exit status and
    run.json counts): the variants must change the cost only, never a verdict."""
    runs = [r for row in rows for r in row.runs]
    if not runs:
        return []
    ref = runs[0]
    out = []
    for r in runs[1:]:
        diff = []
        if r.outcome != ref.outcome and "--item" not in r.command:   # (--item=case: pytest counts items)
            diff.append(f"outcome {r.outcome!r}")
        if r.exit_status != ref.exit_status:
            diff.append(f"exit status {r.exit_status}")
        if r.counts != ref.counts:
            diff.append(f"counts {r.counts}")
        if diff:
            out.append(f"{r.label}: " + ", ".join(diff) + f" (the cold run: {ref.outcome!r}, exit status "
                       f"{ref.exit_status}, counts {ref.counts})")
    return out


def table(rows: list[VariantRow]) -> str:
    head = f"{'variant':<30} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7} {'vs base':>10}  outcome"
    lines = [head, "-" * len(head)]
    for r in rows:
        pct = "-" if r.pct_vs_default is None else f"{r.pct_vs_default:+.1f}%"
        lines.append(f"{r.label:<30} {len(r.runs):>4} {r.median_s:>9.2f} {r.min_s:>7.2f} {r.max_s:>7.2f} "
                     f"{pct:>10}  {r.outcome}")
    return "\n".join(lines)


def own_time(targets: list[str], cases_per_op: int | None, ops: list[str] | None, batch_size: int = 64,
             log=None, latency_cases: int | None = None, rounds: int = 2) -> dict[str, float]:
    """Each target's own time for the run's cases, in this process without pytest, golden or
    isolation (suite/bench/throughput.py; a cached target's warm-cache run): the floor the run's
    wall time is measured against. ``latency_cases`` None: every case in batches (the issue's
    T_own); a number: planned as the run plans them (that many of each group alone, for their
    latency, then batches; the run's default is 3). Each target's least time of ``rounds`` rounds
    (a first round pays for what a runtime sets up once, and a shared machine's noise only adds)."""
    best: dict[str, float] = {}
    for _ in range(max(1, rounds)):
        rows = throughput.run(targets, cases_per_op or 30, batch_size=batch_size, ops=ops, modes=("on",), log=log,
                              latency_cases=latency_cases)
        for r in rows:
            if r.mode in ("on", "on, warm cache"):
                best[r.target] = min(best.get(r.target, r.wall_s), r.wall_s)
    return best


def ratios(rows: list[VariantRow], own: dict[str, float]) -> dict[str, float]:
    """Each variant's median wall / the targets' own batched time (their sum: one process per target)."""
    total = sum(own.values())
    return {r.label: round(r.median_s / total, 2) for r in rows if total > 0 and r.median_s}
