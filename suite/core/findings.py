"""Known disagreements between runtimes and the spec (``suite/core/findings.toml``)."""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass
from pathlib import Path

from suite.core.errors import QconformError
from suite.core.spec import known_ops
from suite.core.userfile import tomllib  # (tomli on Python 3.10)

FILE = Path(__file__).parent / "findings.toml"


@dataclass(frozen=True)
class Finding:
    id: str
    op: tuple[str, ...]
    target: tuple[str, ...]
    reason: str
    variant: tuple[str, ...] = ("*",)
    status: tuple[str, ...] = ("fail",)   # the verdicts it explains: fail, crash, timeout, error
    #: its region, a function of the case (suite/cases/hunt/params.py: zero points, scale ratios,
    #: multipliers, shapes, attributes) and the verdict (max_abs_lsb, cause): any one of these
    #: tables of conditions, all of whose params hold. A finding with one matches every case by it
    #: (a generated case, a case file, a hunted case, a model's layer alike), never by ``variant``
    where: tuple[dict, ...] = ()
    #: runtimes that give the golden's value on ``case`` (a case file, from the checkout's root):
    #: independent confirmation of the golden where the finding's target disagrees with it
    witnesses: tuple[str, ...] = ()
    case: str = ""
    #: the CPU the case ran on has every one of ``isa_has`` and none of ``isa_lacks`` (ISA flags,
    #: targets.device_runner.isa_flags); a finding with either matches no verdict whose ISA is unknown
    isa_has: tuple[str, ...] = ()
    isa_lacks: tuple[str, ...] = ()

    ticket: str = ""   # where it is tracked (an issue or a vendor's ticket: id or link), if anywhere
    #: a whole model's finding (``pytest --model``): the model file names (patterns) it is about;
    #: it explains a whole-model verdict (status "model-error", "model-fail") and never a case
    model: tuple[str, ...] = ()


    @property
    def why(self) -> str:
        """The reason, and the ticket when it has one: what every report shows beside its id."""
        return self.reason + (f" (ticket: {self.ticket})" if self.ticket else "")

    def holds_on(self, isa: frozenset[str] | None) -> bool:
        """Whether a CPU with these ISA flags meets the finding's ISA condition (None: flags not
        known, which meets only a finding without one)."""
        if not (self.isa_has or self.isa_lacks):
            return True
        return isa is not None and isa.issuperset(self.isa_has) and isa.isdisjoint(self.isa_lacks)

    def matches(self, op: str, target: str, variant: str, status: str = "fail", params: dict | None = None,
                isa: frozenset[str] | None = None) -> bool:
        if self.model or not (status in self.status and any(fnmatch.fnmatchcase(op, p) for p in self.op)
                and any(fnmatch.fnmatchcase(target, p) for p in self.target)):
            return False
        if not self.holds_on(isa):
            return False
        if self.where:   # (no params: a caller without a case, e.g. a whole group's bias: no match)
            return params is not None and any(all(_holds(params.get(k), c) for k, c in w.items()) for w in self.where)
        return any(fnmatch.fnmatchcase(variant, p) for p in self.variant)


def _holds(value, cond) -> bool:
    """A param against one condition: [lo, hi] (two numbers: lo <= value <= hi), a list (one of
    them), or a value (equal to it). A missing param holds nothing."""
    if value is None:
        return False
    if isinstance(cond, list) and len(cond) == 2 and all(isinstance(c, (int, float)) and not isinstance(c, bool)
                                                         for c in cond):
        return not isinstance(value, (bool, str)) and cond[0] <= value <= cond[1]
    if isinstance(cond, list):
        return value in cond
    return value == cond


def _tuple(v) -> tuple[str, ...]:
    return tuple(v) if isinstance(v, list) else (v,)


@functools.cache
def findings() -> tuple[Finding, ...]:
    with open(FILE, "rb") as f:
        raw = tomllib.load(f)
    out = []
    for i, r in enumerate(raw.get("finding", [])):
        for j, p in enumerate(_tuple(r.get("op", "*"))):   # a finding for "CONV2D" would explain nothing
            if not any(fnmatch.fnmatchcase(op, p) for op in known_ops()):
                raise QconformError(f"{p!r} matches no operator of the spec tables", source=str(FILE),
                                    field=f"finding[{i}].op" + (f"[{j}]" if isinstance(r.get("op"), list) else ""),
                                    rule="a finding's op patterns match an operator")
        where = r.get("where", [])
        where = [where] if isinstance(where, dict) else where
        if not isinstance(where, list) or not all(isinstance(w, dict) and w for w in where):
            raise QconformError("must be a table of param conditions, or a list of them", source=str(FILE),
                                field=f"finding[{i}].where", rule="where = {param = value | [lo, hi] | [a, b, ...]}")
        wit = r.get("witnesses", [])
        if not (isinstance(wit, list) and all(isinstance(w, str) and w for w in wit)) or (wit and not r.get("case")):
            raise QconformError("must be a list of target names, with `case` naming the case file they ran",
                                source=str(FILE), field=f"finding[{i}].witnesses", rule="witnesses = [\"ort\", ...]")
        for key in ("isa_has", "isa_lacks"):
            if not (isinstance(r.get(key, []), list) and all(isinstance(x, str) and x for x in r.get(key, []))):
                raise QconformError("must be a list of ISA flags", source=str(FILE), field=f"finding[{i}].{key}",
                                    rule=f'{key} = ["avx2", ...] (names of /proc/cpuinfo\'s flags)')
        if where and "variant" in r:   # one verdict per case: the region decides, wherever the case runs
            raise QconformError("a finding with a region (where) matches cases by it alone", source=str(FILE),
                                field=f"finding[{i}].variant", rule="where or variant, not both")
        out.append(Finding(id=r["id"], op=_tuple(r.get("op", "*")), target=_tuple(r.get("target", "*")),
                           reason=r["reason"], variant=_tuple(r.get("variant", "*")),
                           status=_tuple(r.get("status", "fail")), where=tuple(where),
                           ticket=str(r.get("ticket", "")), model=_tuple(r["model"]) if "model" in r else (),
                           witnesses=tuple(wit), case=str(r.get("case", "")),
                           isa_has=tuple(r.get("isa_has", ())), isa_lacks=tuple(r.get("isa_lacks", ()))))
    return tuple(out)


def match(op: str, target: str, variant: str = "*", status: str = "fail", params: dict | None = None,
          isa: frozenset[str] | None = None) -> Finding | None:
    """The first finding that explains this verdict (``params``: the case's, suite/cases/hunt/params.py
    ``case_params``, with the verdict's ``max_abs_lsb`` and ``cause``; ``isa``: the ISA flags of the
    CPU it ran on)."""
    for f in findings():
        if f.matches(op, target, variant, status, params, isa):
            return f
    return None


def match_model(model: str, target: str, status: str) -> Finding | None:
    """The first model finding that explains a whole model's verdict on ``target`` (``status``:
    "model-error", the model did not run; "model-fail", a layer beyond its tolerance)."""
    return next((f for f in findings() if f.model and status in f.status
                 and any(fnmatch.fnmatchcase(model, p) for p in f.model)
                 and any(fnmatch.fnmatchcase(target, p) for p in f.target)), None)


def why(finding_id: str) -> str | None:
    """The reason (and ticket) of the finding ``finding_id``; None for an id findings.toml lacks."""
    return next((f.why for f in findings() if f.id == finding_id), None)


def brief(text: str, limit: int = 160) -> str:
    """``text`` up to its first ": " or "; " outside parentheses (its first clause), at most
    ``limit`` characters: a terminal line's share of a reason."""
    depth, end = 0, len(text)
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith((": ", "; "), i):
            end = i
            break
    head = text[:end]
    return head if len(head) <= limit else head[:limit - 3].rstrip() + "..."
