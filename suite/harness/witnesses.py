"""Witnesses from outside the run: a bad verdict's case on the local targets the run did not include.

A run of one target (``pytest --target=htp``) has no other runtime to say whether the golden's
value is the spec's (another runtime gives it bit for bit) or the target shares a behaviour with
another runtime. So each of the run's first :data:`LIMIT` failing cases is also run on every
other built-in local target (``targets.DEFAULT_TARGETS`` less the run's and ``ref``), each in a
worker process of its own (suite/harness/isolation.py: a crash or hang there is that witness's
answer, never the run's), started at the first bad verdict. A case is handed to them when it is
judged; its test takes their answers (:meth:`Outside.answers`), by then mostly in. A target
whose runtime is missing answers why (its worker cannot create it).
"""

from __future__ import annotations

import os
from collections import deque

from suite.core.case import Case
from targets import BUILTIN, DEFAULT_TARGETS, get_target
from targets.base import Outcome, Timing

from .isolation import executor_for

#: failing cases of a run (per pytest process) witnessed by the targets outside the run
LIMIT = 200
#: the golden run as a target: no witness of itself
NOT_WITNESSES = frozenset({"ref"})


class Outside:
    """The local targets a run did not include, as witnesses of its bad verdicts."""

    def __init__(self, run_targets, timeout: float, limit: int = LIMIT, names: list[str] | None = None):
        if names is None:   # $QCONFORM_WITNESS_TARGETS (comma list, built-in names) narrows them
            env = [n.strip() for n in os.environ.get("QCONFORM_WITNESS_TARGETS", "").split(",") if n.strip()]
            names = [n for n in env if n in BUILTIN] if env else DEFAULT_TARGETS
        self._all = [n for n in names if n not in NOT_WITNESSES]
        self.names = [n for n in self._all if n not in set(run_targets)]
        self.timeout, self.limit = float(timeout), limit
        self._executors: dict | None = None   # started at the first bad verdict
        self._broken: dict[str, str] = {}     # target -> why it could not even be made here
        self._queue: dict[str, deque] = {}    # target -> case ids handed to its worker, in order
        self._answers: dict[str, dict[str, Outcome]] = {}   # case id -> target -> its outcome
        self._asked: list[str] = []           # case ids handed over (at most ``limit``)
        self._timing = Timing(warmup=0, repeats=1)

    def readmit(self, name: str) -> None:
        """``name`` has left the run (its worker found it unavailable): a witness like any other."""
        if name in self._all and name not in self.names and self._executors is None:
            self.names = [n for n in self._all if n in self.names or n == name]

    def _start(self) -> dict:
        if self._executors is None:
            self._executors = {}
            for n in self.names:
                try:
                    self._executors[n] = executor_for(get_target(n), "process", self.timeout, ahead=2)
                except Exception as e:   # (a target class that cannot be made: its reason is its answer)
                    self._broken[n] = f"{type(e).__name__}: {e}"
                self._queue[n] = deque()
        return self._executors

    def submit(self, case: Case) -> bool:
        """Hand ``case`` to every outside target (False: none, or past the limit, or given already)."""
        if not self.names or case.id in self._answers or len(self._asked) >= self.limit:
            return False
        self._asked.append(case.id)
        self._answers[case.id] = {}
        for n, ex in self._start().items():
            ex.submit([case], 1, self._timing)
            self._queue[n].append(case.id)
        return True

    def submitted(self, case_id: str) -> bool:
        return case_id in self._answers

    def answers(self, case_id: str) -> dict[str, Outcome]:
        """Each outside target's outcome of the case (waiting for those not in yet)."""
        got = self._answers.get(case_id, {})
        for n, ex in list((self._executors or {}).items()):
            while n not in got and case_id in self._queue[n]:
                cases, outs = ex.next()
                cid = self._queue[n].popleft()
                o = self._answers.setdefault(cid, {})[n] = outs[0] if outs else Outcome.error("no outcome")
                if o.status == "error" and ("could not create the target" in o.reason
                                            or "not available here" in o.reason):
                    self._broken[n] = o.reason   # (its runtime is missing: not started again for each case)
                    ex.close()
                    del self._executors[n]
                    self._queue[n].clear()
        for n, why in self._broken.items():
            got.setdefault(n, Outcome.error(why))
        return got

    def close(self) -> None:
        for ex in (self._executors or {}).values():
            ex.close()
        self._executors = {} if self._executors is not None else None


def not_run_text(status: str, reason: str) -> str:
    """Why a witness gave no outputs, in a few words (the first clause of its reason)."""
    r = " ".join(str(reason).split())
    if any(w in r for w in ("No module named", "not importable", "could not create the target", "not available here")):
        r = "unavailable here: " + r.split("could not create the target:")[-1].split("not available here:")[-1].strip()
    r = r.split(";")[0]
    return f"{status}: {r[:60]}" + ("..." if len(r) > 60 else "") if r else status
