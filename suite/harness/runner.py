"""One conformance run: targets, golden cache, batched execution, verdicts, results.

The pytest plugin creates one :class:`Run` per session (per xdist worker). Each
test asks ``run.verdict(case, target)``. In a pipelined run (suite/pipeline.py) the
batches were run ahead of the tests and the test only waits for its verdict; otherwise
the first request for an (op, target) pair runs the pending cases of that pair as one
batch (up to ``--batch-size``, after the latency singles). Either way a target can
amortize model and session building while each case keeps its own verdict.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
import shlex
import threading
import time
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suite.core.case import Case
from suite.core.compare import Comparison, compare
from suite.core.errors import QconformError
from suite.core.tolerance import Policy, Tolerance, load_policy

DEFAULT_REPORT_DIR = "reports/latest"
DEFAULT_BATCH = 64
GOLDEN_CACHE_BYTES = 256 << 20   # goldens kept per worker (all schemes), least recently used go first
STACKS_BYTES = 64 << 20          # other-scheme goldens kept stacked for the cause analysis (recent cases)


class _BytesLRU:
    """Values kept by key up to ``limit`` bytes (``size(value)``), the least recently used going first."""

    def __init__(self, limit: int, size):
        self._d: OrderedDict = OrderedDict()
        self._limit, self._size, self._bytes = limit, size, 0

    def get(self, key):
        hit = self._d.get(key)
        if hit is not None:
            self._d.move_to_end(key)
        return hit

    def put(self, key, value) -> None:
        self._d[key] = value
        self._bytes += self._size(value)
        while self._bytes > self._limit and len(self._d) > 1:
            _, old = self._d.popitem(last=False)
            self._bytes -= self._size(old)


def _drop(row: dict) -> None:
    """A row not kept (its pair left the plan): its failure file goes too."""
    if row.get("failure_file"):
        Path(row["failure_file"]).unlink(missing_ok=True)


@dataclass
class RunConfig:
    targets: list[str]
    seed: int = 0
    cases_per_op: int = 30
    report_dir: str = DEFAULT_REPORT_DIR
    tolerance_file: str | None = None
    scheme: str | None = None
    warmup: int = 1
    repeats: int = 5
    batch_size: int = DEFAULT_BATCH
    latency_cases: int = 3     # per (target, op): run alone, so latency is the case's own
    case_files: list[str] = field(default_factory=list)
    ops: list[str] | None = None
    target_options: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    truncate: bool = True
    worker: str | None = None
    waivers: list[str] = field(default_factory=list)   # waiver files (reports/waivers.py)
    certify: bool = False
    isolation: str = "process"   # "process": native targets run in worker processes (suite/isolation.py)
    timeout: float = 60.0        # seconds per case in a worker (crash/hang -> crash/timeout verdicts)
    pipeline: bool = True        # run planned batches ahead of the tests (suite/pipeline.py)
    golden_cache: str | None = None   # folder of goldens kept between runs (suite/golden_cache.py); None: off


@dataclass
class Verdict:
    status: str                      # pass / fail / unsupported / error / crash / timeout / infra
    case: Case
    target: str
    comparison: Comparison | None = None
    tolerance: Tolerance | None = None
    reason: str = ""
    row: dict[str, Any] = field(default_factory=dict)
    finding: Any = None              # a known runtime/spec disagreement (suite/core/findings.toml)

    def message(self) -> str:
        c, cmp = self.case, self.comparison
        head = f"{c.id} on {self.target}"
        if self.finding is not None:
            head += f" [known finding {self.finding.id}: {self.finding.reason}]"
        if self.status == "fail" and cmp is not None:
            if cmp.garbage:
                text = f"{head}: bad output: {cmp.garbage}"
            else:
                err = (cmp.first_got - cmp.first_want) if isinstance(cmp.first_got, (int, float)) else None
                text = (f"{head}: {cmp.mismatches}/{cmp.elements} elements off "
                        f"(max |err| {cmp.max_abs_lsb:g} LSB, allowed {self.tolerance.describe()}); "
                        f"first mismatch output {cmp.first_output} index {list(cmp.first_index)}: "
                        f"got {cmp.first_got}, want {cmp.first_want}"
                        + (f" ({err:+g} LSB)" if err is not None else ""))
        else:
            text = f"{head}: {self.status}: {self.reason}"
        repro = self.row.get("repro")
        if repro:
            text += f"\nreproduce: {repro}"
        return text


class Run:
    def __init__(self, config: RunConfig, targets: dict | None = None):
        from targets import get_target
        self.config = config
        self.policy: Policy = load_policy(config.tolerance_file)
        from targets.base import Timing
        self.timing = Timing(warmup=config.warmup, repeats=config.repeats)
        self.targets = targets if targets is not None else {}
        for name in config.targets:
            if name not in self.targets:
                self.targets[name] = get_target(name, **config.target_options.get(name, {}))
        self._versions: dict[str, dict[str, str]] = {}
        self._golden = _BytesLRU(GOLDEN_CACHE_BYTES, lambda outs: sum(np.asarray(a).nbytes for a in outs))
        self._digests: dict[int, tuple[Case, str]] = {}   # id(case) -> (case, digest): computed once
        from suite.core.waivers import load_waivers
        self.waivers = load_waivers(config.waivers)
        self._pending: dict[tuple[str, str], OrderedDict[str, Case]] = defaultdict(OrderedDict)
        self._singles: dict[tuple[str, str], int] = {}
        self._verdicts: dict[tuple[str, str], Any] = {}   # judged, not yet asked for (or the exception)
        # a row is written as soon as its case is judged (kill -9 loses at most the case in flight);
        # a pytest-xdist worker also judges pairs another worker is given: it writes rows when asked
        self._rows_when_judged = config.worker is None
        self._writer = None
        self.report_dir = Path(config.report_dir)
        self.run_id = config.run_id or _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
        self.stats = defaultdict(float)   # wall-time accounting (target invoke vs harness)
        self._isolators: dict[str, Any] = {}   # target name -> suite.isolation.Isolator (or None: in process)
        self._ending: list = []   # isolators whose workers were asked to end (close), not yet reaped
        self._disk = None
        self._analyses = None   # suite.golden_cache.AnalysisCache with a golden cache
        if config.golden_cache:
            from suite.harness.golden_cache import AnalysisCache, GoldenCache
            self._disk = GoldenCache(Path(config.golden_cache))
            self._analyses = AnalysisCache(Path(config.golden_cache))
        self._plan: list[tuple[Case, str]] = []
        self._stacks = _BytesLRU(STACKS_BYTES, lambda st: st[1].nbytes)   # (digest, schemes) -> scheme_stack
        self._pipeline = None   # suite.pipeline.Pipeline while the planned batches run ahead of the tests
        self._hold: list | None = None   # rows judged while the plan is a guess (start_pipeline)
        self._wanted: set | None = None   # after a wrong guess: the (target, case id)s of the plan
        self._rows_lock = threading.Lock()
        # the rows this process wrote, parsed back (judge thread) for the report at the end, so it
        # need not read results.jsonl again (suite/plugin.py; not for --resume or xdist)
        self.kept_rows: list | None = [] if config.worker is None else None
        # what the report needs of each kept row (its summary groups, its parquet row), made by the
        # judge as the run goes (reports.summary.ReportCache; pipelined runs), not after the last test
        self.report_cache = None

    # ---- set-up
    def versions(self, target: str) -> dict[str, str]:
        if target not in self._versions:
            try:
                self._versions[target] = dict(self.targets[target].versions())
            except Exception as e:
                self._versions[target] = {"error": f"{type(e).__name__}: {e}"}
        return self._versions[target]

    def plan(self, pairs: list[tuple[Case, str]]) -> None:
        """Register the (case, target) pairs this session will ask for, in order."""
        for case, t in pairs:
            self._pending[(t, case.op)][case.id] = case
        self._plan.extend(pairs)

    def pipelines(self) -> bool:
        """Whether this run pipelines (start_pipeline): --pipeline on, --isolation process, not
        an xdist worker."""
        return self.config.pipeline and self.config.worker is None and self.config.isolation == "process"

    def prestart(self) -> None:
        """Start the isolated targets' worker processes now (they import their runtimes while
        the cases are generated and collected); only for a run that pipelines."""
        if self.pipelines():
            for name in self.config.targets:
                iso = self._isolator(name)
                if iso is not None:
                    iso.prestart()

    def start_pipeline(self, guess: bool = False) -> bool:
        """Run the planned batches ahead of the tests (suite/pipeline.py), when that is safe:
        targets isolated in worker processes, not an xdist worker (whose tests are not known
        ahead). Returns whether it started.

        ``guess``: the plan is what collection will most likely give (the generated cases in
        test order), made before pytest has built the items, so the targets start that much
        earlier. Until :meth:`settle_plan` has the collected plan, rows are held back; then
        only the pairs that will be reported are written and run."""
        if self._pipeline is not None or not self._plan or not self.pipelines():
            return False
        from suite.harness.pipeline import Pipeline
        if guess:
            self._hold = []
        if self.kept_rows is not None:
            self._expect_groups(self._plan)
        self._pipeline = Pipeline(self, self._plan)
        return True

    @property
    def guessing(self) -> bool:
        """A pipeline runs on a guessed plan (start_pipeline(guess=True)) not yet settled."""
        return self._hold is not None

    def settle_plan(self, pairs: list[tuple[Case, str]]) -> bool:
        """The collected plan, for a pipeline started on a guess: the held rows are written, and
        if the plan is not the guess (a plugin deselected or reordered tests), the pairs not in
        it are dropped: not run, their verdicts and rows (and failure files) not kept. Returns
        whether the guess was right."""
        pairs = list(pairs)
        same = len(pairs) == len(self._plan) and all(a[0] is b[0] and a[1] == b[1]
                                                     for a, b in zip(pairs, self._plan))
        with self._rows_lock:
            held, self._hold = self._hold or [], None
            if not same:
                self._wanted = {(t, c.id) for c, t in pairs}
                self._plan = pairs
                if self.report_cache is not None:
                    self._expect_groups(pairs)
                self._pipeline.replan(pairs, self._wanted)
                for r in held:
                    if (r["target"], r["case_id"]) not in self._wanted:
                        _drop(r)
                held = [r for r in held if (r["target"], r["case_id"]) in self._wanted]
            for row in held:   # under the lock: before any row the judge writes from now on
                self._append(row)
        return same

    def _expect_groups(self, pairs) -> None:
        from reports.summary import ReportCache
        self.report_cache = ReportCache(Counter((c.op, t) for c, t in pairs))

    def wanted(self, target: str, case_id: str) -> bool:
        """Whether the pair is in the plan (always, but after a guess that was wrong)."""
        return self._wanted is None or (target, case_id) in self._wanted

    def _write_row(self, row: dict[str, Any]) -> None:
        with self._rows_lock:
            if self._hold is not None:
                self._hold.append(row)
                return
            if not self.wanted(row["target"], row["case_id"]):
                _drop(row)
                return
        self._append(row)

    def _append(self, row: dict[str, Any]) -> None:
        line = self.writer.append(row)
        if self.kept_rows is not None:   # as a reader of the file will see it (JSON types)
            kept = json.loads(line)
            self.kept_rows.append(kept)
            if self.report_cache is not None:   # (pipelined: the judge thread, while targets run)
                try:
                    self.report_cache.add(kept)
                except Exception:   # only a head start for the report: it is all made at the end
                    self.report_cache = None

    @property
    def writer(self):
        if self._writer is None:
            from reports.results import ResultWriter
            self._writer = ResultWriter(self.report_dir, truncate=False)
        return self._writer

    def digest(self, case: Case) -> str:
        """``case.digest()``, computed once per case object of this run (the runner never
        changes a case; the digest hashes all its data)."""
        hit = self._digests.get(id(case))
        if hit is None or hit[0] is not case:
            hit = self._digests[id(case)] = (case, case.digest())
        return hit[1]

    # ---- golden
    def golden(self, case: Case, scheme: str | None = None) -> list[np.ndarray]:
        """The golden of ``case`` under ``scheme`` (default: the run's), cached per digest and scheme.

        The cache keeps the most recently used goldens up to GOLDEN_CACHE_BYTES; with
        ``golden_cache`` a golden computed by an earlier run of the same golden code is read
        from there (suite/golden_cache.py).
        """
        from reference import golden
        from reference.schemes import DEFAULT_SCHEME
        name = scheme or self.config.scheme or DEFAULT_SCHEME
        key = (self.digest(case), name)
        hit = self._golden.get(key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        hit = self._disk.get(key[0], name) if self._disk is not None else None
        if hit is None:
            hit = golden(case, name)
            if self._disk is not None:
                self._disk.put(key[0], name, hit)
        self.stats["golden_s"] += time.perf_counter() - t0
        self._golden.put(key, hit)
        return hit

    # ---- execution
    def take_part(self, target: str, op: str, first: Case | None = None) -> tuple[list[Case], int]:
        """The next batch of (target, op) from its pending cases (``first`` first), taken off the
        pending list, and how many of its first cases run alone: the first cases of each
        (target, op) run on their own, because a target that merges a batch into one model can
        only time the batch, so these give the op's own per-case latency. They go with the rest
        of the batch in one hand-over (one message to an isolated target's worker)."""
        pend = self._pending[(target, op)]
        singles = self._singles.get((target, op), 0)
        room = max(0, self.config.latency_cases - singles)   # latency singles still to run
        head = [first] if first is not None else []
        rest = (c for cid, c in pend.items()
                if (first is None or cid != first.id) and (target, cid) not in self._verdicts)
        batch = head + list(itertools.islice(rest, room + max(1, self.config.batch_size) - len(head)))
        alone = min(len(batch), room)
        self._singles[(target, op)] = singles + alone
        for c in batch:
            pend.pop(c.id, None)
        return batch, alone

    def _run_batch(self, case: Case, target: str) -> None:
        """Run ``case`` with the pending cases of its (op, target) as one batch (:meth:`take_part`);
        each case is judged as soon as its outcome exists."""
        batch, alone = self.take_part(target, case.op, first=case)
        def judged(k: int, i: int, o) -> None:
            self._verdicts[(target, batch[i].id)] = self._judged(batch[i], target, o)
        self.execute_parts(target, [(batch, alone)], judged)

    def _judged(self, case: Case, target: str, o):
        """The verdict of an outcome, or the exception judging it raised (a harness bug: raised
        when this case's test asks for it)."""
        try:
            return self._judge(case, target, o)
        except Exception as e:
            return e

    def execute_parts(self, target: str, parts: list[tuple[list[Case], int]], on_outcome=None,
                      while_running=None):
        """Run batches ``[(cases, alone), ...]`` of one target, handed over at once; the first
        ``alone`` cases of a batch each run on their own (``run([case])``), the rest together, and
        a batch that fails as a whole is run one case at a time. ``on_outcome(k, i, outcome)``
        once per case of batch ``k``, as soon as it exists. Returns the outcomes per batch.

        Isolated targets run in a worker process, all batches in one message, back to back
        (suite/isolation.py ``run_parts``): a crash or hang is the ``crash`` / ``timeout``
        verdict of the case in flight. Anything but one Outcome per case is an ``error``
        (suite.isolation.check_outcomes). ``while_running()``: called once the target has its
        cases (Isolator.run_parts), e.g. to send the next targets theirs.

        Neither ``on_outcome`` nor ``while_running`` counts as the target's time."""
        from targets.base import run_in_parts
        from suite.harness.isolation import check_outcomes
        t0 = time.perf_counter()
        aside = [0.0]

        def timed(fn, *args) -> None:
            t1 = time.perf_counter()
            fn(*args)
            aside[0] += time.perf_counter() - t1

        def emit(k: int, i: int, o) -> None:
            if on_outcome is not None:
                timed(on_outcome, k, i, o)
        started = None if while_running is None else (lambda: timed(while_running))
        iso = self._isolator(target)
        if iso is not None:   # outcomes checked and passed on by the isolator, each once
            own0 = iso.stats["busy_s"] + iso.stats["worker_start_s"]
            outs = iso.run_parts(parts, self.timing, on_outcome=emit, while_running=started)
        else:   # in this process: each part's outcomes go on before the next part runs
            if started is not None:
                started()
            outs = []
            for k, (cs, alone) in enumerate(parts):
                outs.append(check_outcomes(run_in_parts(self.targets[target], cs, self.timing, alone), len(cs)))
                for i, o in enumerate(outs[-1]):
                    emit(k, i, o)
        for got in outs:   # the target's own invoke time (info invoke_s: warm-up included), else its samples
            for o in got:
                inv = o.info.get("invoke_s")
                inv = float(inv) if isinstance(inv, (int, float)) else sum(o.latency_us or ()) / 1e6
                self.stats[f"invoke_s:{target}"] += inv
        waited = time.perf_counter() - t0 - aside[0]
        self.stats["target_wait_s"] += waited   # what the runner waited, messages and GIL waits included
        if iso is not None:   # the worker's own time (and its start-up), not the messages or our waits
            spent = iso.stats["busy_s"] + iso.stats["worker_start_s"] - own0
        else:
            spent = waited
        self.stats[f"target_wall_s:{target}"] += spent   # per target (reports: suite/timing.py)
        self.stats[f"cases:{target}"] += sum(len(cs) for cs, _ in parts)
        return outs

    def submit(self, target: str, parts: list[tuple[list[Case], int]]) -> bool:
        """Hand ``parts`` to the target's idle worker ahead of :meth:`execute_parts` with the same
        object (suite/isolation.py ``Isolator.submit``), so its cases are in the worker before
        its turn; False when that cannot be done (nothing is lost: they go then)."""
        iso = self._isolator(target)
        return iso is not None and iso.submit(parts, self.timing)

    # ---- verdicts
    def verdict(self, case: Case, target: str) -> Verdict:
        """The verdict of (case, target). The first request of a batch runs it; each case is
        judged, and its row written, as soon as its outcome exists, so a run killed with
        SIGKILL loses at most the case in flight (docs/reliability.md)."""
        key = (target, case.id)
        if self._pipeline is not None:
            v = self._pipeline.wait(case, target)
        else:
            if key not in self._verdicts:
                self._run_batch(case, target)
            v = self._verdicts.pop(key)
        if isinstance(v, Exception):
            raise v
        if not self._rows_when_judged:
            self._write_row(v.row)
        return v

    def _judge(self, case: Case, target: str, o) -> Verdict:
        """Compare one outcome with the golden, apply tolerance/findings/waivers, write its row."""
        from targets.base import latency_stats
        t_start = time.perf_counter()
        v = Verdict(o.status, case, target, reason=o.reason)
        cmp = None
        if o.status == "ok":
            try:
                want = self.golden(case)
            except Exception as e:
                v.status, v.reason = "error", f"golden failed: {type(e).__name__}: {e}"
            else:
                cmp = compare(want, o.outputs, case.outputs)
                dtype = case.outputs[0].dtype
                tol = self.policy.lookup(case.op, target, dtype, self.versions(target))
                v.comparison, v.tolerance = cmp, tol
                if cmp.garbage:
                    v.status, v.reason = "error", f"target returned garbage: {cmp.garbage}"
                elif tol.passes(cmp.max_abs_lsb, 100.0 - cmp.exact_pct):
                    v.status = "pass"
                else:
                    v.status = "fail"
                    v.reason = f"max |err| {cmp.max_abs_lsb:g} LSB, {cmp.mismatches}/{cmp.elements} elements off"
                if v.status == "fail":
                    self._save_failure(case, target, want, o.outputs)
        if v.status in ("fail", "crash", "timeout", "error"):
            from suite.core.findings import match
            f = match(case.op, target, case.variant, v.status)
            if f is not None:
                v.finding = f
                v.reason = f"known finding {f.id}: {f.reason}; {v.reason}"
            if v.status != "fail" and not (v.status == "error" and v.reason.startswith("golden failed")):
                self._save_failure(case, target, None, None, reason=v.reason)
        v.row = self._row(v, o, cmp, latency_stats(o.latency_us))
        if cmp is not None and not cmp.garbage:
            v.row.update(self._analyse(case, cmp, want))
        if self.waivers:
            self.waivers.apply(v, self.versions(target))   # a waived failure becomes "waived"
        v.row["harness_s"] = round(time.perf_counter() - t_start, 6)
        self.stats["judge_s"] += v.row["harness_s"]
        if self._rows_when_judged:
            self._write_row(v.row)
        return v

    def _analyse(self, case: Case, cmp: Comparison, want) -> dict[str, Any]:
        """Per-scheme exact counts and mismatch causes of one result (reports/causes.py)."""
        from reference.schemes import DEFAULT_SCHEME
        from reports.causes import analyse
        t0 = time.perf_counter()
        scheme = self.config.scheme or DEFAULT_SCHEME
        key = self._analyses.key(self.digest(case), scheme, cmp.errors) if self._analyses is not None else None
        hit = self._analyses.get(key) if key is not None else None
        if hit is not None:   # the same errors of the same case as an earlier run: the same fields
            out = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
                   for k, v in hit.items()}
            out["analysis_s"] = round(time.perf_counter() - t0, 6)
            self.stats["analysis_s"] += out["analysis_s"]
            return out
        try:
            out = analyse(case, cmp.errors, want, lambda s: self.golden(case, s),
                          scheme, stack=lambda names: self._scheme_stack(case, names))
            if key is not None:
                self._analyses.put(key, dict(out))
        except Exception as e:   # recorded in the row, never silently dropped
            out = {"analysis_error": f"{type(e).__name__}: {e}"}
        out["analysis_s"] = round(time.perf_counter() - t0, 6)
        self.stats["analysis_s"] += out["analysis_s"]
        return out

    def _scheme_stack(self, case: Case, names: list[str]):
        """reports.causes.scheme_stack of ``case``, kept for its other targets (the most recently
        used, up to STACKS_BYTES: a case's targets are judged close together, within its op)."""
        from reports.causes import scheme_stack
        key = (self.digest(case), tuple(names))
        hit = self._stacks.get(key)
        if hit is None:
            hit = scheme_stack(case, lambda s: self.golden(case, s), names)
            self._stacks.put(key, hit)
        return hit

    def repro_command(self, case: Case, target: str, failure_file: Path | None = None) -> str:
        t = shlex.quote(target)
        if failure_file is not None:
            return (f"pytest --target={t} --case-file={shlex.quote(str(failure_file))} "
                    f"--report-dir=/tmp/qconform-repro")
        if case.source:
            return f"pytest --target={t} --case-file={shlex.quote(case.source)}"
        return (f"pytest --target={t} --seed {self.config.seed} --cases-per-op {self.config.cases_per_op} "
                f"--ops {case.op} -k {shlex.quote(f'{case.id}:{target}')}")

    def failure_path(self, case: Case, target: str) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in target)
        return self.report_dir / "failures" / safe / f"{case.id}.json"

    def _save_failure(self, case: Case, target: str, want, got, reason: str = "") -> None:
        """Save a failing (or crashing, hanging, erroring) case as a case file with got and want."""
        path = self.failure_path(case, target)
        try:
            d = case.to_dict()
            if want is None:
                try:
                    want = self.golden(case)
                except Exception:
                    want = None
            if want is not None:
                d["want"] = [np.asarray(w).ravel().tolist() for w in want]
            if got is not None:
                d["got"] = [np.asarray(g).ravel().tolist() for g in got]
            if reason:
                d["reason"] = reason
            d["target"] = target
            import json
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(d, separators=(",", ":")) + "\n")
            os.replace(tmp, path)
        except OSError:
            pass

    def _row(self, v: Verdict, o, cmp: Comparison | None, lat: dict) -> dict[str, Any]:
        c = v.case
        saved = v.status in ("fail", "crash", "timeout") or (v.status == "error"
                                                             and not v.reason.startswith("golden failed"))
        failure_file = self.failure_path(c, v.target) if saved else None
        row: dict[str, Any] = {
            "run_id": self.run_id, "case_id": c.id, "op": c.op, "variant": c.variant, "index": c.index,
            "spec": c.spec, "clause": c.clause, "target": v.target, "device": o.info.get("device"),
            "status": v.status, "reason": v.reason, "case_digest": self.digest(c),
            "seed": self.config.seed if not c.source else None, "case_file": c.source,
            "scheme": self.config.scheme or "tflite-ref-double",
            "out_dtype": c.outputs[0].dtype if c.outputs else None,
            "time": _dt.datetime.now().isoformat(timespec="seconds"),
            "worker": self.config.worker,
        }
        if cmp is not None:
            row.update({
                "bit_exact": cmp.bit_exact, "elements": cmp.elements, "mismatches": cmp.mismatches,
                "max_abs_lsb": cmp.max_abs_lsb, "mean_err_lsb": cmp.mean_err_lsb,
                "sum_err_lsb": cmp.sum_err_lsb,
                "first_output": cmp.first_output,
                "first_index": list(cmp.first_index) if cmp.first_index is not None else None,
                "got": cmp.first_got, "want": cmp.first_want,
            })
            if v.tolerance is not None:
                row["tolerance_lsb"] = v.tolerance.max_abs_lsb
                row["tolerance_rule"] = v.tolerance.rule.index if v.tolerance.rule else None
        row.update({"p50_us": lat["p50_us"], "p90_us": lat["p90_us"], "min_us": lat["min_us"],
                    "spread_us": lat["spread_us"], "latency_n": lat["n"]})
        for k, val in o.info.items():
            if k not in row and isinstance(val, (str, int, float, bool)):
                row[k] = val
        if v.finding is not None:
            row["finding"] = v.finding.id
        if v.status in ("fail", "error", "crash", "timeout", "infra"):
            row["repro"] = self.repro_command(c, v.target, failure_file)
            if failure_file is not None:
                row["failure_file"] = str(failure_file)
        return row

    def reap(self) -> None:
        """Wait for the worker processes :meth:`close` asked to end."""
        while self._ending:
            self._ending.pop().reap()

    def _isolator(self, target: str):
        """The worker-process runner of ``target``, or None when it runs in this process."""
        if target not in self._isolators:
            from suite.harness.isolation import isolator_for
            self._isolators[target] = isolator_for(self.targets[target], self.config.isolation, self.config.timeout)
        return self._isolators[target]

    def close(self, wait_workers: bool = True) -> None:
        """End the pipeline, the targets (their worker processes) and the result file. With
        ``wait_workers=False`` the workers are asked to end and :meth:`reap` waits for them."""
        if self._pipeline is not None:
            self._pipeline.stop()
            busy, self._pipeline = self._pipeline.alive, None
            if busy:   # an in-process target still inside its batch: leave its objects alone
                return
        for iso in self._isolators.values():
            if iso is not None:
                for k, v in iso.stats.items():
                    self.stats[f"isolation_{k}"] += v
                iso.close(wait=False)
                self._ending.append(iso)
        self._isolators.clear()
        if wait_workers:
            self.reap()
        for t in self.targets.values():
            try:
                t.close()
            except Exception:
                pass
        if self._writer is not None:
            self._writer.close()
        if self._disk is not None:
            self.stats["golden_cache_hits"] += self._disk.hits
            self._disk.hits = 0
            self._disk.save()
        if self._analyses is not None:
            self.stats["analysis_cache_hits"] += self._analyses.hits
            self._analyses.hits = 0
            self._analyses.save()


def load_case_files(paths: list[str]) -> list[Case]:
    """Load and spec-check case files; raises QconformError on the first bad one."""
    from suite.core.case import expand_case_paths, load_case
    from suite.core.spec import check_case
    cases = []
    seen: dict[str, str] = {}
    for p in expand_case_paths(paths):
        c = load_case(p)
        problems = check_case(c)
        if problems:
            pr = problems[0]
            raise QconformError(f"{pr.message} [{pr.clause}]", source=str(p), field=pr.field,
                                rule="the case must follow its spec table")
        if c.id in seen:
            c.id = f"{c.id}~{Path(p).stem}"
        seen[c.id] = str(p)
        cases.append(c)
    return cases
