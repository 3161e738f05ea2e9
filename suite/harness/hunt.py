"""The hunt: a differential search for the cases on which a target disagrees most with the golden.

For one (op, target) and a budget in seconds, hypothesis draws cases from the op's space
(suite/cases/hunt: every choice the spec tables leave open is a draw); each is spec-checked (a
case its table forbids is never run), run on the target in its worker process (a crash or hang
costs that case: suite/harness/isolation.py) and judged by the run's own judge
(suite/harness/judge.py: the same golden, scheme and tolerance). Each judged case reports scores
to hypothesis's targeting (``hypothesis.target``): the severity (crash or timeout above error
above a failure above a pass, then the error in LSB), max |error| in LSB and the share of elements
off; hypothesis climbs from the best cases toward larger disagreement. The search runs in rounds
(100 cases, then 200, 400, ...: each a hypothesis run seeded from the seed, op, target and round,
with its targeting pass), so any budget gets both generation and targeting. Only a group's first
hit scores as a failure (a known finding's never, unless ``include_known``): the search then
climbs toward failures of another kind.

Failures are grouped by symptom: status, cause (suite/harness/judge.py :func:`symptom`), best
scheme, where the worst element lies (:func:`failure_region`) and the finding that explains it,
not by the case's parameters (those are in each group's case file). A new group's first case is shrunk at once (suite/harness/shrink.py,
for the ops it supports; at most SHRINK_RUNS runs and SHRINK_SHARE of the budget), a smaller later
hit replaces it, and each group's case is written as a case file with a ``hunt`` section and the
``judged`` section a failure file has (its printed repro judges it as the hunt did). The same seed
gives the same search on the same machine (hypothesis seeded, its database off,
:attr:`OpHunt.fingerprint` over the cases in order); only where the budget ends depends on speed
(``max_examples`` ends it by count instead).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reference.schemes import DEFAULT_SCHEME
from reference.common import act_range
from suite.cases.hunt import HypothesisDraw, RandomDraw, draw_case, params
from suite.core.case import Case
from suite.core.errors import QconformError
from suite.core.dtypes import DTYPES
from suite.core.findings import findings
from suite.core.spec import check_case
from suite.core.tolerance import DEFAULT_FILE, load_policy
from suite.core.verdict import Status
from suite.core.waivers import Waivers
from targets.base import Timing

from .folder import safe_name, write_whole
from .isolation import executor_for
from .judge import Goldens, Judge, symptom, unspecified
from .repro import JUDGED, digest_of, judged_section
from .shrink import Judgement, elements, shrink

FORMAT = "qconform-hunt/1"
FINDINGS_ENV = "QCONFORM_FINDINGS"   # "off": hunt as if findings.toml were empty
FIRST_ROUND = 100                    # cases of the first round; each next one doubles
SHRINK_SHARE = 0.05                  # of the budget one group's shrinking may take at most
SHRINK_RUNS = 60                     # target runs per group's shrink at most
SEVERITY = {"crash": 1e6, "timeout": 1e6, "error": 1e5}


def findings_on(option: bool | None = None) -> bool:
    """Findings are consulted unless switched off (``--findings off``, or $QCONFORM_FINDINGS=off)."""
    if option is not None:
        return option
    return os.environ.get(FINDINGS_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


@dataclass(frozen=True)
class HuntOptions:
    seed: int = 0
    budget: float = 60.0               # seconds per (op, target), search and shrink
    timeout: float = 10.0              # per case in the worker process
    scheme: str = DEFAULT_SCHEME
    tolerance_file: str | None = None
    tolerance_digest: str | None = None   # (None: of the file as it is now)
    include_known: bool = False
    findings: bool = True
    max_examples: int | None = None    # end after this many cases whatever the time left
    shrink: bool = True
    search: str = "targeted"           # "random": the same spaces, no targeting (docs/hunt.md)
    isolation: str = "process"


@dataclass
class Group:
    """One distinct failure: its key, its first hit, and its smallest case."""

    key: tuple
    status: str
    cause: str
    best_scheme: str | None
    region: dict
    first_s: float
    first_example: int
    case: Case
    row: dict
    finding: str | None
    known: bool
    hits: int = 1
    got: list | None = None
    shrunk: dict | None = None
    file: str | None = None

    @property
    def max_abs_lsb(self):
        return self.row.get("max_abs_lsb")

    def line(self) -> str:
        lsb = f", max |err| {self.max_abs_lsb:g} LSB" if self.max_abs_lsb is not None else ""
        known = f" [known finding {self.finding}]" if self.known else \
            (f" [matches finding {self.finding}: findings off]" if self.finding else " [new]")
        reg = ", ".join(f"{k}={v}" for k, v in self.region.items())
        best = f", best scheme {self.best_scheme}" if self.best_scheme else ""
        return (f"{self.status} ({self.cause}{lsb}{best}) after {self.first_s:.1f} s, {self.hits} hit(s); "
                f"{reg}{known}" + (f"\n      {self.file}" if self.file else ""))


@dataclass
class OpHunt:
    op: str
    target: str
    examples: int = 0
    rounds: int = 0
    seconds: float = 0.0
    search_s: float = 0.0
    counts: dict = field(default_factory=dict)   # invalid, golden_refused, unsupported, cut, ...
    groups: list[Group] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # the space's own bugs (first few)
    trace: object = field(default_factory=hashlib.sha256, repr=False)   # over the cases drawn, in order

    @property
    def fingerprint(self) -> str:
        """The search's cases in order, hashed: the same seed gives the same one (up to where it ended)."""
        return self.trace.hexdigest()[:16]

    @property
    def new(self) -> list[Group]:
        return [g for g in self.groups if not g.known]

    def summary(self) -> str:
        head = (f"{self.op} on {self.target}: {self.examples} cases in {self.seconds:.1f} s ({self.rounds} round(s), "
                f"fingerprint {self.fingerprint}), {len(self.groups)} distinct failure(s), {len(self.new)} new")
        return "\n".join([head] + [f"  - {g.line()}" for g in self.groups])


def hypothesis_target(observation: float, label: str = "") -> None:
    """hypothesis.target: hypothesis is imported by a hunt only (the plugin and the CLI import this
    module; hypothesis costs half a second of CPU)."""
    from hypothesis import target
    target(observation, label=label)


class _BudgetSpent(KeyboardInterrupt):
    """Ends a hypothesis run from inside its test (hypothesis lets KeyboardInterrupt through)."""


def _seed(*keys) -> int:
    h = 0
    for k in keys:
        h = zlib.crc32(str(k).encode(), h)
    return h


ROUNDING = ("tie", "scheme", "1 LSB")


def failure_region(case: Case, row: dict, status: str) -> dict:
    """Where a bad verdict's worst element lies, as a symptom (not the case's parameters): for a
    failure, the golden's value against the output's limits (``want``: "act-low" / "act-high" at
    a bound of the fused activation, "dtype-low" / "dtype-high" at one of the dtype, else "inside";
    for a clamp, the bound the kernel got wrong: below the range "act-low", above it "act-high")
    and the sign of the error (``err``); for a crash, timeout or error its reason with the numbers
    and names in it dropped (the signal, the runtime's error code)."""
    if status != "fail":
        words = re.findall(r"[A-Za-z_]{3,}", str(row.get("reason") or ""))
        codes = [w for w in words if w.isupper() or w.startswith("SIG")]
        return {"reason": " ".join(dict.fromkeys(codes or words[:4]))}
    err, want = row.get("worst_err_lsb"), row.get("worst_want")
    if err is None or want is None or row.get("worst_output") != 0:
        return {"want": "-", "err": "-"}
    if row.get("worst_cause") == "clamp":   # the activation's bound the kernel got wrong, whatever want is
        return {"want": "act-low" if err < 0 else "act-high", "err": "+" if err > 0 else "-"}
    info = DTYPES.get(case.outputs[0].dtype)
    where = "inside"
    if info is not None and info.qmin is not None:
        try:
            lo, hi = act_range(case, case.outputs[0])
        except Exception:  # noqa: BLE001 (an unknown activation: the golden refused the case)
            lo, hi = info.qmin, info.qmax
        where = ("dtype-low" if want == info.qmin else "dtype-high" if want == info.qmax
                 else "act-low" if want == lo else "act-high" if want == hi else "inside")
    return {"want": where, "err": "+" if err > 0 else "-"}


def best_scheme(row: dict, run_scheme: str) -> str | None:
    """The scheme that reproduces most of the target's elements (the run's own on a tie)."""
    exact = row.get("scheme_exact") or {}
    if not exact:
        return None
    top = max(exact.values())
    return run_scheme if exact.get(run_scheme) == top else min(k for k, v in exact.items() if v == top)


class Hunter:
    """The hunts of one target: its worker process is started once and kept across ops."""

    def __init__(self, target_name: str, target, opts: HuntOptions, selector: str | None = None,
                 log: Callable[[str], None] | None = None):
        self.name, self.target, self.opts = target_name, target, opts
        self.selector = selector or target_name
        self.log = log or (lambda s: None)
        self.ex = executor_for(target, opts.isolation, opts.timeout)
        self.tolerance_file = str(opts.tolerance_file or DEFAULT_FILE)
        self.tolerance_digest = opts.tolerance_digest or digest_of(self.tolerance_file)
        self.judge = Judge(scheme=opts.scheme, policy=load_policy(opts.tolerance_file), waivers=Waivers(),
                           goldens=Goldens(), run_id="hunt", seed=opts.seed)
        self.timing = Timing(warmup=0, repeats=1)

    def close(self) -> None:
        self.ex.close()

    # ---------------------------------------------------------------- one case
    def run_case(self, case: Case, limit: float | None = None):
        """(verdict, outcome) of ``case``: run in the worker (with a time limit no longer than
        ``--case-timeout``) and judged by the run's judge."""
        if hasattr(self.ex, "timeout"):
            self.ex.timeout = min(self.opts.timeout, limit) if limit else self.opts.timeout
        o = self.ex.run([case], self.timing)[0]
        self.judge.goldens = Goldens()   # (one case's goldens: a hunt never meets a case twice)
        with np.errstate(all="ignore"):  # (float schemes of the cause analysis overflow at extreme scales)
            v, _ = self.judge(case, self.name, o, self.ex.versions())
        self.matched = v.finding   # the judge's finding (by the case's params); the hunt decides
        if v.finding is not None:  # whether it counts (--findings), so the verdict is left bare
            f = next(f for f in findings() if f.id == v.finding)
            v.reason = v.reason.removeprefix(f"known finding {f.id}: {f.reason}; ")
            v.row.update(reason=v.reason)
            v.row.pop("finding", None)
            v.finding = None
        return v, o

    # ---------------------------------------------------------------- the search
    def hunt(self, op: str) -> OpHunt:
        opts = self.opts
        res = OpHunt(op, self.name)
        t0 = time.monotonic()
        end = t0 + opts.budget
        groups: dict[tuple, Group] = {}
        counts = res.counts
        # a random search has no hypothesis test to report scores to: nothing steers it
        steer = hypothesis_target if opts.search != "random" else (lambda score, label: None)

        def one(d, refuse: Callable[[], None]) -> None:
            """Draw, check, run and judge one case; tell hypothesis how far it got."""
            now = time.monotonic()
            if now >= end or (opts.max_examples is not None and res.examples >= opts.max_examples):
                raise _BudgetSpent
            index = res.examples
            res.examples += 1
            try:
                case = draw_case(d, op, index)
            except Exception as e:   # a bug of the space: counted and shown, never a finding
                counts["space_error"] = counts.get("space_error", 0) + 1
                if len(res.errors) < 3:
                    res.errors.append(f"{type(e).__name__}: {e}")
                return refuse()
            res.trace.update(case.digest().encode())
            if check_case(case):   # the spec forbids it: never run
                counts["invalid"] = counts.get("invalid", 0) + 1
                return refuse()
            limit = max(1.0, end - now)
            v, o = self.run_case(case, limit)
            status = v.status.value
            if unspecified(case) and status not in ("crash", "timeout"):   # run, but the outputs not judged
                counts["unspecified"] = counts.get("unspecified", 0) + 1
                return
            if v.golden_error:   # a case the golden refuses (its kernel rules): nothing to judge
                counts["golden_refused"] = counts.get("golden_refused", 0) + 1
                return refuse()
            if status == "timeout" and getattr(self.ex, "timeout", opts.timeout) < opts.timeout:
                counts["cut"] = counts.get("cut", 0) + 1   # cut short by the budget, not --case-timeout
                return
            if v.status is Status.UNSUPPORTED:
                counts["unsupported"] = counts.get("unsupported", 0) + 1
                steer(-1.0, label="severity")
                return
            cmp = v.comparison
            lsb = float(cmp.max_abs_lsb) if cmp is not None and not cmp.garbage else 0.0
            frac = cmp.mismatches / max(cmp.elements, 1) if cmp is not None and not cmp.garbage else 0.0
            score = 0.0
            if v.status.is_bad:
                counts[status] = counts.get(status, 0) + 1
                g = self._record(groups, case, v, o, time.monotonic() - t0, index)
                if opts.shrink and g.hits == 1 and (not g.known or opts.include_known):
                    self._shrink(g, min(end, time.monotonic() + SHRINK_SHARE * opts.budget))
                # only a group's first hit scores: the search then looks for another kind of failure
                hot = (not g.known or opts.include_known) and g.hits == 1
                score = (SEVERITY.get(status, 1e3 + min(lsb, 1e4))) if hot else 0.0
                lsb, frac = (lsb, frac) if hot else (0.0, 0.0)
            else:
                counts["pass"] = counts.get("pass", 0) + 1
                score = min(lsb, 1e4) + frac
            steer(score, label="severity")
            steer(math.log2(1.0 + lsb), label="max_abs_lsb")
            steer(frac, label="mismatch")

        while time.monotonic() < end and (opts.max_examples is None or res.examples < opts.max_examples):
            n = FIRST_ROUND << min(res.rounds, 12)
            rseed = _seed(opts.seed, op, self.name, res.rounds)
            res.rounds += 1
            try:
                if opts.search == "random":
                    rng = np.random.default_rng(rseed)
                    for _ in range(n):
                        one(RandomDraw(rng), lambda: None)
                else:
                    self._round(one, rseed, n)
            except _BudgetSpent:
                break
        res.groups = sorted(groups.values(), key=lambda g: (g.known, g.first_s))
        res.seconds = time.monotonic() - t0
        return res

    @staticmethod
    def _round(one, rseed: int, n: int) -> None:
        from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
        from hypothesis import seed as hypothesis_seed
        from hypothesis import strategies as st
        from hypothesis.errors import Unsatisfiable

        @hypothesis_seed(rseed)
        @settings(max_examples=n, database=None, deadline=None, derandomize=False,
                  phases=[Phase.generate, Phase.target], suppress_health_check=list(HealthCheck),
                  verbosity=Verbosity.quiet, report_multiple_bugs=False, print_blob=False)
        @given(st.data())
        def body(data):
            one(HypothesisDraw(data), reject)
        try:
            body()
        except Unsatisfiable:   # every case of the round was refused (none is a finding)
            pass

    def _record(self, groups: dict, case: Case, v, o, at: float, index: int) -> Group:
        """File a bad verdict under its group (the smaller case kept)."""
        status = v.status.value
        reg = failure_region(case, v.row, status)
        cause = symptom(v.row, status)
        best = best_scheme(v.row, self.opts.scheme) if cause in ROUNDING else None
        # one group per symptom; a finding's region (the judge matched it on the case's params)
        # splits a symptom only where it explains part of it
        key = (status, cause, best, tuple(reg.items()), self.matched)
        f = next((x for x in findings() if x.id == self.matched), None)
        known = f is not None and self.opts.findings
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(key, status, cause, best, reg, round(at, 2), index, case, dict(v.row),
                                    f.id if f else None, known)
            self.log(f"{case.op} on {self.name}: {g.line()}")
        else:
            g.hits += 1
            if elements(case) >= elements(g.case):
                return g
            g.case, g.row, g.shrunk = case, dict(v.row), None   # a smaller case found as it is
        g.got = [np.asarray(x).ravel().tolist() for x in o.outputs] if status == "fail" and o.outputs else None
        return g

    # ---------------------------------------------------------------- shrink and write
    def _shrink(self, g: Group, deadline: float) -> None:
        """Shrink a new group's first case now (SHRINK_RUNS runs at most, until ``deadline``): the
        search goes on after it, so where the budget ends is the only cut a slower machine makes.
        A sub-case counts while it keeps the group's status (a timeout: under the full --case-timeout)."""
        rows: dict[int, dict] = {}

        def judge(case: Case) -> Judgement:
            left = deadline - time.monotonic()
            if left <= 0:
                return Judgement(False, "budget", reason="the budget is spent")
            v, o = self.run_case(case, max(1.0, left))
            cmp = v.comparison
            cut = v.status is Status.TIMEOUT and getattr(self.ex, "timeout", 0) < self.opts.timeout
            if v.golden_error or cut or v.status.value != g.status:
                return Judgement(False, v.status.value, reason=v.reason)
            rows[id(case)] = v.row
            if cmp is None or cmp.garbage:
                return Judgement(True, v.status.value, reason=v.reason)
            return Judgement(True, v.status.value, None, o.outputs, cmp.errors, v.reason)

        try:
            r = shrink(g.case, judge, max_runs=SHRINK_RUNS)
        except QconformError:   # no shrinker for the op, or it does not fail again alone
            return
        if r.case is not g.case:
            g.shrunk = {"from": g.case.id, "elements_before": r.before, "elements_after": r.after,
                        "runs": r.runs, "window": [list(w) for w in r.window]}
            g.case, g.row = r.case, dict(rows.get(id(r.case), g.row))
            g.got = [np.asarray(x).ravel().tolist() for x in r.judgement.got] if r.judgement.got else None

    def document(self, g: Group, res: OpHunt) -> dict:
        """The group's case as a case file: ``hunt`` (what the hunt found), ``want``/``got``,
        ``judged`` (what judged it, as a failure file's)."""
        d = g.case.to_dict()
        try:
            d["want"] = [np.asarray(w).ravel().tolist() for w in Goldens().get(g.case, self.opts.scheme)]
        except Exception:
            pass
        if g.got is not None:
            d["got"] = g.got
        d["reason"] = g.row.get("reason", "")
        d["target"] = self.name
        p = params(g.case)
        d["hunt"] = {"target": self.name, "status": g.status, "max_abs_lsb": g.max_abs_lsb,
                     "mismatches": g.row.get("mismatches"), "elements": g.row.get("elements"),
                     "cause": g.cause, "worst_cause": g.row.get("worst_cause"), "best_scheme": g.best_scheme,
                     "region": g.region,
                     "params": {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in p.items()},
                     "finding": g.finding, "known": g.known, "first_hit_s": g.first_s,
                     "first_example": g.first_example, "hits": g.hits, "examples": res.examples,
                     "seed": self.opts.seed, "budget_s": self.opts.budget, "search": self.opts.search,
                     "shrunk": g.shrunk}
        d[JUDGED] = judged_section(target=self.selector, device=None, scheme=self.opts.scheme,
                                   tolerance_file=self.tolerance_file, tolerance_digest=self.tolerance_digest,
                                   timeout=self.opts.timeout, seed=self.opts.seed, cases_per_op=0, run_id="hunt",
                                   status=g.status, versions=self.ex.versions(), finding=g.finding if g.known else None,
                                   rule=g.row.get("tolerance_rule"), batch=[g.case.id])   # (each runs alone)
        return d

    def write(self, res: OpHunt, out_dir: Path) -> None:
        """Each group's case file into ``out_dir/<target>/`` (``file`` set on the group)."""
        folder = Path(out_dir) / safe_name(self.name)
        for g in res.groups:
            path = folder / f"{safe_name(g.case.id)}.json"
            write_json(path, self.document(g, res))
            g.file = str(path)


def write_json(path: Path, doc) -> None:
    write_whole(path, (json.dumps(doc, separators=(",", ":")) + "\n").encode())


def summary_doc(hunts: list[OpHunt], opts: HuntOptions, versions: dict) -> dict:
    """hunt.json: the options and every (op, target)'s counts and groups."""
    return {"format": FORMAT, "options": {k: v for k, v in opts.__dict__.items()}, "versions": versions,
            "hunts": [{"op": h.op, "target": h.target, "examples": h.examples, "rounds": h.rounds,
                       "fingerprint": h.fingerprint,
                       "seconds": round(h.seconds, 2), "search_s": round(h.search_s, 2), "counts": h.counts,
                       "space_errors": h.errors,
                       "groups": [{"file": g.file, "status": g.status, "cause": g.cause, "best_scheme": g.best_scheme,
                                   "max_abs_lsb": g.max_abs_lsb, "region": g.region, "finding": g.finding,
                                   "known": g.known, "first_hit_s": g.first_s, "hits": g.hits,
                                   "shrunk": g.shrunk is not None} for g in h.groups]}
                      for h in hunts]}
