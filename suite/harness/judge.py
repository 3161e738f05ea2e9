"""The judge: a target's outcome for one case -> a Verdict and its results.jsonl row.

The golden under the run's scheme, the comparison in LSB, the tolerance policy, known
findings, waivers, and the mismatch causes (every kernel scheme's golden: which arithmetic
the target follows). The goldens of a case are computed once for all its targets: they are
kept while the run judges the case's operator (tests run op by op), and between runs in the
golden store (suite/harness/goldens.py) when it is on.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np

from reference import golden
from reports.causes import analyse, scheme_stack
from suite.cases.hunt import params as case_params
from suite.core.case import Case
from suite.core.compare import Comparison, compare
from suite.core.findings import findings, match
from suite.core.tolerance import Policy, Tolerance
from suite.core.verdict import Status, Verdict
from suite.core.waivers import Waivers
from targets.base import Outcome, latency_stats
from targets.device_runner import isa_flags


#: cases of the operator being judged whose goldens the judge keeps in memory, and their bytes at
#: most (a real model's layers hold 10^5-10^6 elements each: goldens under every scheme, stacks)
MEMO_CASES = 4096
MEMO_BYTES = 128 << 20
#: ... in a run whose targets come one after another (a --model run): a case's goldens come back
#: only once the whole model has gone by on the target before, so a memo smaller than the model's
#: goldens is of no use (least recently used in a cycle: every entry is gone when asked for again),
#: while they come back from the golden store on disk; the memo then holds about one op's cases
MEMO_BYTES_SEQUENTIAL = 32 << 20


class Goldens:
    """Each case's goldens, computed once: kept for the operator being judged (its cases' other
    targets), and in ``store`` between runs."""

    def __init__(self, store=None, memo_bytes: int = MEMO_BYTES):
        self.store = store
        self.memo_bytes = memo_bytes
        self._op: str | None = None
        self._cases: dict[int, tuple[Case, str, dict, dict]] = {}   # id(case) -> (case, digest, goldens, stacks)
        # digest -> (goldens, stacks) of the operator being judged, its last MEMO_CASES cases and at
        # most memo_bytes of them (a case pulled again by a witness or a re-run may be another object)
        self._digests: OrderedDict[str, tuple[dict, dict]] = OrderedDict()
        self._sizes: dict[str, int] = {}   # digest -> bytes of its entry, measured when the next one comes
        self._bytes, self._last = 0, None
        self._new: dict[str, dict] = {}   # digest -> goldens computed here, not yet stored
        self.computed = 0

    def _entry(self, case: Case):
        if case.op != self._op:   # a new operator: the last one's goldens are done with (the tests run
            self.flush()          # op by op: plugin._ops_together; one that comes back reads the store)
            self._op, self._cases = case.op, {}
            self._digests.clear()
            self._sizes, self._bytes, self._last = {}, 0, None
        e = self._cases.get(id(case))
        if e is None or e[0] is not case:
            digest = case.digest()
            shared = self._digests.get(digest)
            if shared is None:
                self._measure()
                stored = self.store.get(digest) if self.store is not None else None
                shared = self._digests[digest] = (dict(stored or {}), {})
                self._last = digest
                while len(self._digests) > MEMO_CASES or (self._bytes > self.memo_bytes and len(self._digests) > 1):
                    old, _ = self._digests.popitem(last=False)
                    self._bytes -= self._sizes.pop(old, 0)
            else:
                self._digests.move_to_end(digest)
            e = self._cases[id(case)] = (case, digest, *shared)
        return e

    def _measure(self) -> None:
        """Count the bytes of the entry made last (its goldens and stacks are made by then)."""
        d = self._last
        if d is None or d not in self._digests:
            return
        goldens, stacks = self._digests[d]
        n = sum(int(getattr(a, "nbytes", 0)) for outs in goldens.values() for a in outs)
        n += sum(int(getattr(m, "nbytes", 0)) for _, m in stacks.values())
        self._bytes += n - self._sizes.get(d, 0)
        self._sizes[d] = n

    def digest(self, case: Case) -> str:
        return self._entry(case)[1]

    def get(self, case: Case, scheme: str) -> list[np.ndarray]:
        _, digest, goldens, _ = self._entry(case)
        if scheme not in goldens:
            goldens[scheme] = golden(case, scheme)   # raises for a case the golden cannot compute
            self.computed += 1
            if self.store is not None:
                self._new.setdefault(digest, {})[scheme] = goldens[scheme]
        return goldens[scheme]

    def flush(self) -> None:
        """Store the goldens computed since the last flush (one write per case)."""
        for digest, new in self._new.items():
            self.store.put(digest, new)
        self._new = {}

    def exact_analysis(self, case: Case, scheme: str, errors, want) -> dict:
        """reports.causes.analyse of a bit-exact result of the case (``errors`` all zero), made once
        for all its targets."""
        stacks = self._entry(case)[3]
        key = ("bit-exact analysis", scheme)
        if key not in stacks:
            stacks[key] = (analyse(case, errors, want, lambda s: self.get(case, s), scheme,
                                   stack=lambda names: self.stack(case, names)), None)
        return stacks[key][0]

    def stack(self, case: Case, names: list[str]):
        """reports.causes.scheme_stack of the case, made once for all its targets."""
        stacks = self._entry(case)[3]
        key = tuple(names)
        if key not in stacks:
            stacks[key] = scheme_stack(case, lambda s: self.get(case, s), names)
        return stacks[key]


@functools.cache
def _host_isa() -> frozenset[str]:
    return frozenset(isa_flags())


def _isa(o: Outcome) -> frozenset[str] | None:
    """The ISA flags of the CPU the outcome comes from: its device's (``device_isa``; None when a
    device did not tell them), else this host's."""
    if "device" not in o.info:
        return _host_isa()
    dev = o.info.get("device_isa")
    return frozenset(str(dev).split()) if dev is not None else None


class Judge:
    def __init__(self, *, scheme: str, policy: Policy, waivers: Waivers, goldens: Goldens,
                 run_id: str, seed: int, worker: str | None = None):
        self.scheme, self.policy, self.waivers, self.goldens = scheme, policy, waivers, goldens
        self.run_id, self.seed, self.worker = run_id, seed, worker

    def __call__(self, case: Case, target: str, o: Outcome, versions: dict[str, str]) -> tuple[Verdict, dict | None]:
        """The verdict (its row without repro/failure_file) and, for a failure, crash, hang or
        target error, the failure file's document (the case with got and want)."""
        v = Verdict(Status.ERROR, case.id, case.op, target, reason=o.reason)
        cmp = tol = want = None
        why_open = unspecified(case) if o.status == "ok" else None
        if why_open:   # the spec gives no output to compare with: the case is not judged (a crash still is)
            v.status, v.reason = Status.UNSUPPORTED, f"unspecified: {why_open}; its outputs are not judged"
        elif o.status == "ok":
            try:
                want = self.goldens.get(case, self.scheme)
            except Exception as e:
                v.reason, v.golden_error = f"the golden could not be computed: {type(e).__name__}: {e}", True
            else:
                cmp = compare(want, o.outputs, case.outputs)
                tol = self.policy.lookup(case.op, target, case.outputs[0].dtype, versions)
                if cmp.garbage:
                    v.reason = f"target returned garbage: {cmp.garbage}"
                elif tol.passes(cmp.max_abs_lsb, 100.0 - cmp.exact_pct):
                    v.status = Status.PASS
                else:
                    v.status = Status.FAIL
                    v.reason = f"max |err| {cmp.max_abs_lsb:g} LSB, {cmp.mismatches}/{cmp.elements} elements off"
        else:
            v.status = Status(o.status)
        v.comparison = cmp
        v.row = self._row(v, case, o, cmp, tol)
        if cmp is not None and not cmp.garbage:
            v.row.update(self._analyse(case, cmp, want))
        isa = _isa(o)
        if isa is not None:   # (the CPU's ISA: a group's bias finding may depend on it, reports.causes)
            v.row.setdefault("isa", " ".join(sorted(isa)))
        if v.status.is_bad and not v.golden_error:   # the region of a finding: of the case and its verdict
            f = match(case.op, target, case.variant, v.status.value, verdict_params(case, v.row, v.status.value),
                      isa=isa)
            if f is not None:
                v.finding = v.row["finding"] = f.id
                v.reason = v.row["reason"] = f"known finding {f.id}: {f.reason}; {v.reason}"
        failure = None   # (an infra verdict is the device's, not the case's: nothing to reproduce)
        if v.status.is_bad and v.status is not Status.INFRA and not v.golden_error:
            failure = self._failure(case, target, v, want, o.outputs if v.status is Status.FAIL else None)
        if self.waivers:
            self.waivers.apply(v, versions)
        v.message = _message(v, case, cmp, tol)
        return v, failure

    def _analyse(self, case: Case, cmp: Comparison, want) -> dict[str, Any]:
        """Per-scheme exact counts and mismatch causes (reports/causes.py). A bit-exact result's
        are the golden's own (got == want), so they are worked out once per case for all targets."""
        try:
            if cmp.bit_exact:
                return {k: dict(v) for k, v in self.goldens.exact_analysis(case, self.scheme, cmp.errors, want).items()}
            return analyse(case, cmp.errors, want, lambda s: self.goldens.get(case, s), self.scheme,
                           stack=lambda names: self.goldens.stack(case, names))
        except Exception as e:   # recorded in the row, never silently dropped
            return {"analysis_error": f"{type(e).__name__}: {e}"}

    def _failure(self, case: Case, target: str, v: Verdict, want, got) -> dict:
        d = case.to_dict()
        if want is None:
            try:
                want = self.goldens.get(case, self.scheme)
            except Exception:
                want = None
        if want is not None:
            d["want"] = [np.asarray(w).ravel().tolist() for w in want]
        if got is not None:
            d["got"] = [np.asarray(g).ravel().tolist() for g in got]
        d["reason"] = v.reason
        d["target"] = target
        return d

    def _row(self, v: Verdict, c: Case, o: Outcome, cmp: Comparison | None, tol: Tolerance | None) -> dict[str, Any]:
        row: dict[str, Any] = {
            "run_id": self.run_id, "case_id": c.id, "op": c.op, "variant": c.variant, "index": c.index,
            "spec": c.spec, "clause": c.clause, "target": v.target, "device": o.info.get("device"),
            "status": v.status.value, "reason": v.reason, "case_digest": self.goldens.digest(c),
            "seed": self.seed if not c.source else None, "case_file": c.source, "scheme": self.scheme,
            "out_dtype": c.outputs[0].dtype if c.outputs else None,
            "time": _dt.datetime.now().isoformat(timespec="seconds"), "worker": self.worker,
        }
        if v.golden_error:
            row["golden_error"] = True
        if cmp is not None:
            # (no mismatch: every error is zero, so are the counts above and below the golden)
            pos = sum(int(np.count_nonzero(e > 0)) for e in cmp.errors) if cmp.mismatches else 0
            neg = sum(int(np.count_nonzero(e < 0)) for e in cmp.errors) if cmp.mismatches else 0
            row.update({
                "bit_exact": cmp.bit_exact, "elements": cmp.elements, "mismatches": cmp.mismatches,
                "max_abs_lsb": cmp.max_abs_lsb, "mean_err_lsb": cmp.mean_err_lsb, "sum_err_lsb": cmp.sum_err_lsb,
                "first_output": cmp.first_output,
                "first_index": list(cmp.first_index) if cmp.first_index is not None else None,
                "got": cmp.first_got, "want": cmp.first_want,
                # elements above / below the golden: the sign test of the (op, target) bias
                "pos_err": pos, "neg_err": neg,
            })
            if cmp.mismatches and not cmp.garbage:   # (the golden is kept: no second computation)
                want = self.goldens.get(c, self.scheme)
                row.update(_worst(cmp, o.outputs, want))
                row["toward_zp_err"] = _toward_zero_point(cmp, want, c)
            if not cmp.garbage:   # the same case on two devices: bit-identical outputs iff equal digests
                row["out_digest"] = _digest(o.outputs)
            if tol is not None:
                row["tolerance_lsb"] = tol.max_abs_lsb
                row["tolerance_rule"] = tol.rule.index if tol.rule else None
        lat = latency_stats(o.latency_us)
        row.update({"p50_us": lat["p50_us"], "p90_us": lat["p90_us"], "min_us": lat["min_us"],
                    "spread_us": lat["spread_us"], "latency_n": lat["n"]})
        for k, val in o.info.items():
            if k not in row and isinstance(val, (str, int, float, bool)):
                row[k] = val
        return row


def unspecified(case: Case) -> str | None:
    """Why the spec gives no output for ``case`` (a NaN in a float32 input: neither LiteRT's nor
    ONNX's quantization says what NaN becomes), or None. Such a case runs; only a crash or a hang
    is a verdict, its outputs are not judged (+-inf, subnormals and -0.0 are specified: the
    quotient rounds and saturates)."""
    for i, t in enumerate(case.inputs):
        if t.dtype == "float32" and t.data is not None and np.isnan(np.asarray(t.data, np.float32)).any():
            return f"input {i} has NaN: the spec says nothing of its result"
    return None


def symptom(row: dict, status: str) -> str:
    """What a bad verdict is, coarsely: crash / timeout / error, or for a failure its worst element's
    cause (reports/causes.py: "tie", "scheme", "clamp", "saturation") or "1 LSB" when no element is
    more than 1 LSB off, else "wrong values" (an unexplained element more than 1 LSB off)."""
    if status != "fail":
        return status
    worst = (row.get("worst_cause") or "").split(" ")[0]
    if worst in ("tie", "scheme", "clamp"):
        return worst
    lsb = row.get("max_abs_lsb")
    if lsb is None or lsb > 1:
        return "saturation" if worst == "saturation" else "wrong values"
    return "1 LSB"


def verdict_params(case: Case, row: dict, status: str) -> dict:
    """What a finding's ``where`` is evaluated on (suite/core/findings.toml): the case's params
    (suite/cases/hunt/params.py), its ``max_abs_lsb`` and its :func:`symptom` as ``cause``. A case
    whose params cannot be computed has none: no finding's region holds for it (new, not known)."""
    try:
        p = case_params(case)
    except Exception:  # noqa: BLE001 (a case the params cannot describe: in no region)
        p = {}
    return {**p, "max_abs_lsb": row.get("max_abs_lsb"), "cause": symptom(row, status)}


def known_crashes(cases: list[Case], target: str) -> list[bool]:
    """For each case, whether a finding says it crashes ``target`` on this host, as its verdict
    will be judged (:func:`verdict_params`): a hint for planning only (suite/harness/run.py runs
    such a case alone, in a fork of the worker); a wrong hint costs time, never a verdict."""
    about: dict[str, list] = {}   # op -> the crash findings about it on target (most ops: none)
    out = []
    for c in cases:
        if c.op not in about:
            about[c.op] = [f for f in findings() if f.about(c.op, target, "crash")]
        fs = about[c.op]
        if fs:
            p = verdict_params(c, {}, "crash")
            out.append(any(f.matches(c.op, target, c.variant, "crash", p, _host_isa()) for f in fs))
        else:
            out.append(False)
    return out


def _digest(outputs) -> str:
    """A short SHA-256 of the outputs' dtypes, shapes and bytes (little-endian, C order)."""
    h = hashlib.sha256()
    for g in outputs:
        a = np.asarray(g)
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _worst(cmp: Comparison, got, want) -> dict[str, Any]:
    """The row fields of the element with the largest |error| (the first of equals, outputs in
    order: the element reports/causes.py labels ``worst_cause``)."""
    k = max(range(len(cmp.errors)), key=lambda i: int(np.abs(cmp.errors[i]).max(initial=0)))   # first of equals
    e = cmp.errors[k]
    j = int(np.abs(e).argmax())
    return {"worst_output": k, "worst_index": [int(i) for i in np.unravel_index(j, e.shape)],
            "worst_got": np.asarray(got[k]).ravel()[j].item(), "worst_want": np.asarray(want[k]).ravel()[j].item(),
            "worst_err_lsb": int(e.ravel()[j])}


def _toward_zero_point(cmp: Comparison, want, c: Case) -> int:
    """Mismatching elements whose error points at the output zero point (|got - zp| < |want - zp|):
    all of them for a kernel that breaks ties toward zero, a bias the +/- sign test cannot see
    (certificates test it: reports/certify.py)."""
    n = 0
    for e, w, spec in zip(cmp.errors, want, c.outputs):
        z = spec.zero_point[0] if spec.zero_point and len(spec.zero_point) == 1 else None
        if z is not None and np.asarray(w).dtype.kind in "iu":
            n += int(np.count_nonzero(np.asarray(e) * (np.asarray(w).reshape(np.shape(e)).astype(np.int64) - z) < 0))
    return n


def _message(v: Verdict, c: Case, cmp: Comparison | None, tol: Tolerance | None) -> str:
    head = f"{c.id} on {v.target}"
    if v.finding is not None:
        head += f" [known finding {v.finding}]"
    r = v.row
    if v.status is Status.FAIL and cmp is not None and "worst_index" in r:
        why = f"{r['worst_err_lsb']:+d} LSB" + (f", cause: {r['worst_cause']}" if r.get("worst_cause") else "")
        return (f"{head}: {cmp.mismatches}/{cmp.elements} elements off "
                f"(max |err| {cmp.max_abs_lsb:g} LSB, allowed {tol.describe()}); "
                f"worst at output {r['worst_output']} index {r['worst_index']}: "
                f"got {r['worst_got']}, want {r['worst_want']} ({why})")
    return f"{head}: {v.status.value}: {v.reason}"
