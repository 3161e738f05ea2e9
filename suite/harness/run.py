"""One conformance run in one pytest process (in a pytest-xdist worker: its share of the tests).

The plugin registers the run's pairs (:meth:`Run.plan`, in test order): each (op, target)
group's cases become batches (the first ``latency_cases`` of a group each run alone, so their
latency is their own), queued on the target in case-id order, whatever order the tests run in
(pytest-randomly shuffles them): a group's batches are the same every run, so targets' caches of
compiled batch models (htp, openvino) hit. Each test asks for its verdict
(:meth:`Run.verdict`): the target's batches are taken in order until its case is judged; every
case of a batch is judged and its row written at once, and each verdict is kept only until its
test takes it.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict

from reports import witness
from suite.core.case import Case
from suite.core.compare import compare
from suite.core.text import clean
from suite.core.tolerance import DEFAULT_FILE, load_policy
from suite.core.verdict import Verdict
from suite.core.waivers import load_waivers
from targets.base import Timing

from .folder import RunFolder
from .isolation import executor_for
from .judge import MEMO_BYTES, MEMO_BYTES_SEQUENTIAL, Goldens, Judge, known_crashes
from .judge import _digest as out_digest   # the rows' out_digest, so an outside witness's agrees
from .options import RunOptions
from .repro import JUDGED, digest_of, judged_section, repro_command
from .witnesses import Outside, not_run_text


def group_parts(cases: list[Case], target, latency_cases: int, batch_size: int) -> list[tuple[list[Case], int]]:
    """(cases, alone) of each batch of one (op, target) group: in case-id order (the same batches
    every run, whatever the test order: caches of compiled batch models hit), its first
    ``latency_cases`` each alone (their latency their own), then batches of ``batch_size``. A
    target whose run time is no device's latency (the TOSA reference model), or that times each
    case inside a batch, sets fewer (its ``latency_cases``)."""
    cases = sorted(cases, key=lambda c: c.id)
    cap = getattr(target, "latency_cases", None)   # (a duck-typed kernel may lack it)
    lat, size = latency_cases if cap is None else min(latency_cases, cap), max(1, batch_size)
    return [(cases[:lat + size], min(lat, len(cases)))] + [(cases[i:i + size], 0)
                                                            for i in range(lat + size, len(cases), size)]


class Run:
    def __init__(self, opts: RunOptions, folder: RunFolder, targets: dict, run_id: str,
                 golden_store=None, worker: str | None = None, policy=None, waivers=None,
                 tolerance: tuple[str, str] | None = None, sequential: bool = False, workers: dict | None = None):
        self.opts, self.folder, self.run_id = opts, folder, run_id
        # one target at a time (a --model run: its tests ordered target by target, planned lazily):
        # a target's worker ends when the target has nothing left to run, so the runtimes' working
        # memory (compiled models, buffers) is not held side by side; the workers still start
        # together (their imports overlap; an idle one holds 20-45 MB)
        self.sequential = sequential
        # the policy as its failures will name it: the run folder's copy and its SHA-256 (suite/harness/repro.py)
        self.tolerance = tolerance or (str(opts.tolerance_file or DEFAULT_FILE),
                                       digest_of(opts.tolerance_file or DEFAULT_FILE))
        self.policy = policy if policy is not None else load_policy(opts.tolerance_file)
        self.waivers = waivers if waivers is not None else load_waivers(list(opts.waivers))
        self.targets = targets
        # native targets' worker processes start now (``workers``: those started already, by the
        # run's set-up): they import their runtimes meanwhile
        self.executors = {n: (workers or {}).get(n) or executor_for(t, opts.isolation, opts.timeout, opts.ahead)
                          for n, t in targets.items()}
        self.goldens = Goldens(golden_store, MEMO_BYTES_SEQUENTIAL if sequential else MEMO_BYTES)
        self.judge = Judge(scheme=opts.scheme, policy=self.policy, waivers=self.waivers, goldens=self.goldens,
                           run_id=run_id, seed=opts.seed, worker=worker)
        self.timing = Timing(warmup=opts.warmup, repeats=opts.repeats)
        self._versions: dict[str, dict[str, str]] = {}
        self._queued: dict[str, set[str]] = defaultdict(set)   # target -> ids of its planned cases
        self._groups: dict[tuple[str, str], list[Case]] = {}   # lazy plan: (target, op) -> cases
        self._verdicts: dict[tuple[str, str], Verdict | Exception] = {}   # judged, not yet asked for
        self._rowed: set[tuple[str, str]] = set()   # (target, case id)s with their row written
        self.stats: Counter = Counter()
        # witnesses (reports/witness.py): case id -> target -> (bit-exact, out_digest) of its row
        self._seen: dict[str, dict[str, tuple]] = defaultdict(dict)
        self._seen_of: dict[str, set[str]] = defaultdict(set)   # op -> its case ids in _seen (forget)
        self._witnessing = False
        # the local targets the run did not include, as witnesses of its bad verdicts (suite/harness/witnesses.py);
        # not with --device (the run's targets are on a device, these on this host) nor --isolation none
        local = not any(getattr(t, "device", None) for t in targets.values()) and opts.isolation == "process"
        self.outside = Outside(targets, opts.timeout, limit=opts.witness_cases, names=None if local else [])
        self._held: dict[tuple[str, str], Case] = {}   # bad verdicts whose outside witnesses are still out

    def versions(self, target: str) -> dict[str, str]:
        if target not in self._versions:
            if target not in self.executors:   # (closed before its worker said them)
                return {}
            self._versions[target] = self.executors[target].versions()
        return self._versions[target]

    def known_versions(self, target: str) -> dict[str, str] | None:
        """The versions if known without waiting for a worker (None: its worker has not said yet)."""
        ex = self.executors.get(target)
        if target not in self._versions and ex is not None:
            known = ex.known_versions() if hasattr(ex, "known_versions") else None
            if known is not None:
                self._versions[target] = known
        return self._versions.get(target)

    def availability(self, target: str) -> tuple[bool, str]:
        """(ok, why) of ``target`` as its worker found when it started (waited for); a target in
        this process was asked when it was made."""
        check = getattr(self.executors[target], "availability", None)
        return check() if check is not None else (True, "")

    def drop(self, target: str) -> None:
        """``target`` leaves the run before anything of it is planned (it cannot run here)."""
        self.executors.pop(target).close()
        self.targets.pop(target, None)
        self.outside.readmit(target)

    def _release(self, target: str) -> None:
        """(sequential) End ``target``'s worker when nothing of it is planned, queued or running."""
        if (self.sequential and not self._queued[target] and not any(t == target for t, _ in self._groups)
                and target in self.executors):
            self.executors[target].release()

    def plan(self, pairs, lazy: bool = False) -> None:
        """Queue the (case, target) pairs this process's tests will ask for, in their order, as
        batches of (op, target) groups. ``lazy`` (a pytest-xdist worker, which is given only some
        of the groups it collected): a group is queued when its first test asks."""
        groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
        for case, target in pairs:
            if case.id not in self._queued[target]:
                groups[(target, case.op)].append(case)
                self._queued[target].add(case.id)
        if lazy:
            self._groups.update(groups)
            return
        for (target, _), cases in groups.items():
            self._submit_group(target, cases)

    def _submit_group(self, target: str, cases: list[Case]) -> None:
        for part, alone in group_parts(cases, self.targets.get(target), self.opts.latency_cases, self.opts.batch_size):
            self._submit(target, part, alone)

    def _submit(self, target: str, cases: list[Case], alone: int) -> None:
        """Queue a batch on ``target``. A case a finding says crashes it would cost the batch
        (rerun one case at a time) and the worker (restarted): it is taken out and runs alone,
        in a fork of the worker (suite/harness/isolation.py), just before the rest of its batch
        (whose cases are then judged when they would have been)."""
        ex = self.executors[target]
        known = known_crashes(cases, target) if getattr(ex, "forks", False) else [False] * len(cases)
        for c, k in zip(cases, known):
            if k:
                ex.submit([c], 1, self.timing, fork=True)
        rest = [c for c, k in zip(cases, known) if not k]
        if rest:
            ex.submit(rest, alone - sum(known[:alone]), self.timing)

    def verdict(self, case: Case, target: str) -> Verdict:
        key = (target, case.id)
        while key not in self._verdicts:
            group = self._groups.pop((target, case.op), None)
            if group is not None:   # (lazy plan) the group's first test
                self._submit_group(target, group)
            elif case.id not in self._queued[target]:   # not planned, or asked again (a re-run)
                self._queued[target].add(case.id)
                self._submit(target, [case], 1)
            self._next_batch(target)
        v = self._verdicts.pop(key)
        if isinstance(v, Exception):   # judging it failed: a harness bug, raised in its own test
            raise v
        if key in self._held:
            self._finish(self._held.pop(key), target, v)
        return v

    def _next_batch(self, target: str) -> None:
        t0 = time.perf_counter()
        cases, outcomes = self.executors[target].next()
        alone = getattr(self.executors[target], "alone", 0)   # (the first `alone` ran each on its own)
        waited = time.perf_counter() - t0
        self.stats[f"target_s:{target}"] += waited
        versions = self.versions(target)
        for k, (c, o) in enumerate(zip(cases, outcomes)):
            self._queued[target].discard(c.id)
            t1 = time.perf_counter()
            try:
                v = self._verdicts[(target, c.id)] = self._judged(c, target, o, versions,
                                                                   [c] if k < alone else cases[alone:])
                v.seconds = waited / len(cases) + (time.perf_counter() - t1)   # its share of the batch, its judging
            except Exception as e:
                self._verdicts[(target, c.id)] = e
            self.stats["judge_s"] += time.perf_counter() - t1
        self._release(target)

    def _judged(self, case: Case, target: str, o, versions, batch: list[Case] = ()) -> Verdict:
        v, failure = self.judge(case, target, o, versions)
        # ---- witnesses (issue #25): the case's outputs on the run's other targets
        if "out_digest" in v.row:
            self._seen[case.id][target] = (bool(v.row.get("bit_exact")), v.row["out_digest"])
            self._seen_of[case.op].add(case.id)
        witnessed = v.status.is_bad and not v.golden_error
        if witnessed:
            self._pull_witnesses(case, target)
        # ---- end witnesses
        if failure is not None:   # the case with got, want and what judged it (suite/harness/repro.py)
            path = self.folder.failure_path(target, case.id)
            failure[JUDGED] = self._judged_section(target, v, versions, [c.id for c in batch])
            self.folder.write_json(path, failure)
            v.row["failure_file"] = str(path)
            v.row["repro"] = repro_command(failure[JUDGED], path)
        if witnessed and (self.outside.submitted(case.id) or self.outside.submit(case)):
            self._held[(target, case.id)] = case   # its row and message when its test takes it (verdict())
            return v
        self._finish(case, target, v, witnessed)
        return v

    def _finish(self, case: Case, target: str, v: Verdict, witnessed: bool = True) -> None:
        """The verdict's witness line and reproduction command; its row appended."""
        if witnessed:
            self._witness(case, target, v)
        if v.row.get("repro"):
            v.message += f"\nreproduce: {v.row['repro']}"
        # a test asked again (pytest-rerunfailures, pytest-repeat) is judged again for pytest, but the
        # record keeps its first row: results.jsonl holds each pair once (reports/results.py), so a
        # re-run can never replace a failure with a pass
        if (target, case.id) not in self._rowed:
            self._rowed.add((target, case.id))
            self.folder.append(v.row)
        else:
            v.message += "\n(asked again: its row is the first verdict's)"
        v.message = clean(v.message)   # (a kernel's text: no control or undecodable character in pytest's output)

    def _pull_witnesses(self, case: Case, target: str) -> None:
        """The run's other targets' batches holding the case (already running ahead) are judged
        now, their verdicts kept for their tests; not within such a pull (one level)."""
        if self._witnessing:
            return
        self._witnessing = True
        try:
            for u in list(self.executors):
                while (u != target and case.id in self._queued[u] and (u, case.id) not in self._verdicts
                       and (u, case.op) not in self._groups):   # (a lazy group not yet queued: no pull)
                    self._next_batch(u)
        finally:
            self._witnessing = False

    def _witness(self, case: Case, target: str, v: Verdict) -> None:
        """Add to a bad verdict which other targets give the golden's value and which this
        target's: the run's other targets (pulled at judging), then the outside ones
        (suite/harness/witnesses.py), or why none ran it."""
        seen = dict(self._seen.get(case.id, {}))
        others: list[str] = []
        off: dict[str, float] = {}   # an outside witness's max |err| (LSB)
        if self.outside.submitted(case.id):
            t0 = time.perf_counter()
            answers = self.outside.answers(case.id)
            self.stats["witness_wait_s"] += time.perf_counter() - t0   # (run.json cost: what they cost the run)
            self.stats["witness_cases"] += 1
            for u, o in answers.items():
                if o.status != "ok":
                    others.append(f"{u} ({not_run_text(o.status, o.reason)})")
                    continue
                try:
                    cmp = compare(self.goldens.get(case, self.opts.scheme), o.outputs, case.outputs)
                except Exception as e:   # (the golden raised: the verdict would say golden_error)
                    others.append(f"{u} (not compared: {type(e).__name__})")
                    continue
                if cmp.garbage:
                    others.append(f"{u} (garbage)")
                else:
                    seen[u] = (cmp.bit_exact, out_digest(o.outputs))
                    off[u] = cmp.max_abs_lsb
        golden, same = witness.split(seen, target, v.row.get("out_digest"))
        ran = [u for u in seen if u not in witness.NOT_WITNESSES]
        others = [f"{u} ({off[u]:g} LSB off)" if u in off else f"{u} (other values)"
                  for u in ran if u != target and u not in golden and u not in same] + others
        v.row["witnesses_golden"], v.row["witnesses_target"] = golden, same
        if others:
            v.row["witnesses_other"] = others
        if not golden and len(ran) >= 2:
            v.row["golden_unwitnessed"] = True
        if not [u for u in ran if u != target] and not others:
            v.row["witnesses_none"] = (
                "no other runtime ran it (none is available here: `qconform targets`)" if not self.outside.names
                else "not asked (--witness-cases 0); `qconform witness FAILURE.json` asks every runtime"
                if self.outside.limit == 0 else
                f"not asked (only the run's first {self.outside.limit} failing cases are); "
                "`qconform witness FAILURE.json` asks every runtime")
        v.message += f"\nwitnesses: {witness.row_text(v.row)}"

    def _judged_section(self, target: str, v: Verdict, versions: dict[str, str], batch: list[str] = ()) -> dict:
        device = getattr(getattr(self.targets[target], "device", None), "text", None) or None
        selector = getattr(self.targets[target], "selector", target)   # as --target selects it (targets.get_target)
        return judged_section(target=selector, device=device, scheme=self.opts.scheme,
                              tolerance_file=self.tolerance[0], tolerance_digest=self.tolerance[1],
                              timeout=self.opts.timeout, seed=self.opts.seed, cases_per_op=self.opts.cases_per_op,
                              run_id=self.run_id, status=v.status.value, versions=versions, finding=v.finding,
                              rule=v.row.get("tolerance_rule"), batch=batch)

    def forget(self, op: str) -> None:
        """The witness data of ``op``'s cases: no test of the op is left to ask (the plugin knows)."""
        for cid in self._seen_of.pop(op, ()):
            self._seen.pop(cid, None)

    def close(self) -> None:
        """End the targets' workers, store the new goldens, close the results file (once)."""
        for (target, cid), case in list(self._held.items()):   # verdicts no test took: their rows all the same
            v = self._verdicts.get((target, cid))
            if isinstance(v, Verdict):
                self._finish(case, target, v)
        self._held.clear()
        self.outside.close()
        for name in self.executors:   # (what run.json says at the end)
            self.known_versions(name)
        executors, self.executors = self.executors, {}
        for name, ex in executors.items():
            ex.close()
            for k, n in ex.stats.items():
                self.stats[f"{k}:{name}"] += n
        if self.goldens.store is not None:
            self.goldens.flush()
        self.folder.close()
