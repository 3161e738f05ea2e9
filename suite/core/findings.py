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


def _isa_holds(has: tuple[str, ...], lacks: tuple[str, ...], isa: frozenset[str] | None) -> bool:
    """A CPU with these ISA flags has every one of ``has`` and none of ``lacks`` (None: flags not
    known, which meets only an empty condition)."""
    if not (has or lacks):
        return True
    return isa is not None and isa.issuperset(has) and isa.isdisjoint(lacks)


@dataclass(frozen=True)
class Witness:
    """A runtime that gives the golden's value on a finding's case, on the CPUs of its ISA condition
    (a runtime's bits can depend on the ISA it dispatches on: ONNX Runtime's u8 x s8 sums without VNNI)."""
    target: str
    isa_has: tuple[str, ...] = ()
    isa_lacks: tuple[str, ...] = ()

    def holds_on(self, isa: frozenset[str] | None) -> bool:
        return _isa_holds(self.isa_has, self.isa_lacks, isa)

    @property
    def condition(self) -> str:
        """The ISA condition in words ("" where it has none)."""
        return " and ".join(filter(None, [" ".join(self.isa_has) and "with " + ", ".join(self.isa_has),
                                          " ".join(self.isa_lacks) and "without " + ", ".join(self.isa_lacks)]))


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
    #: independent confirmation of the golden where the finding's target disagrees with it; a
    #: runtime listed more than once is a witness where any one of its ISA conditions holds
    witnesses: tuple[Witness, ...] = ()
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
        return _isa_holds(self.isa_has, self.isa_lacks, isa)

    def witnesses_on(self, isa: frozenset[str] | None) -> tuple[str, ...]:
        """The witnesses that give the golden's value on a CPU with these ISA flags."""
        return tuple(dict.fromkeys(w.target for w in self.witnesses if w.holds_on(isa)))

    def about(self, op: str, target: str, status: str) -> bool:
        """Whether it explains ``status`` verdicts of ``op`` on ``target`` (somewhere in its region)."""
        return (not self.model and status in self.status and any(fnmatch.fnmatchcase(op, p) for p in self.op)
                and any(fnmatch.fnmatchcase(target, p) for p in self.target))

    def matches(self, op: str, target: str, variant: str, status: str = "fail", params: dict | None = None,
                isa: frozenset[str] | None = None) -> bool:
        if not self.about(op, target, status):
            return False
        if not self.holds_on(isa):
            return False
        if self.where:   # (a case's params, or a group bias's mean_err_lsb and max_abs_lsb; none: no match)
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


def _list(v, i: int, key: str) -> list:
    if not isinstance(v, list):
        raise QconformError("must be a list", source=str(FILE), field=f"finding[{i}].{key}", rule=f"{key} = [...]")
    return v


def _flags(v, field: str) -> tuple[str, ...]:
    if not (isinstance(v, list) and all(isinstance(x, str) and x for x in v)):
        raise QconformError("must be a list of ISA flags", source=str(FILE), field=field,
                            rule=f'{field.rsplit(".", 1)[-1]} = ["avx2", ...] (names of /proc/cpuinfo\'s flags)')
    return tuple(v)


def _witness(w, i: int, j: int) -> Witness:
    """A witness: a target name, or a table ``{ target = "ort", isa_has = [...], isa_lacks = [...] }``."""
    field = f"finding[{i}].witnesses[{j}]"
    if isinstance(w, str) and w:
        return Witness(w)
    if isinstance(w, dict) and isinstance(w.get("target"), str) and w["target"] and set(w) <= {"target", "isa_has", "isa_lacks"}:
        return Witness(w["target"], _flags(w.get("isa_has", []), field + ".isa_has"),
                       _flags(w.get("isa_lacks", []), field + ".isa_lacks"))
    raise QconformError("must be a target name or a table with target (and isa_has, isa_lacks)", source=str(FILE),
                        field=field, rule='witnesses = ["ort", { target = "ort", isa_has = ["avx512_vnni"] }, ...]')


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
        wit = [_witness(w, i, j) for j, w in enumerate(_list(r.get("witnesses", []), i, "witnesses"))]
        if wit and not r.get("case"):
            raise QconformError("witnesses need `case`, the case file they ran", source=str(FILE),
                                field=f"finding[{i}].case", rule='case = "tests/data/witness/....json"')
        for key in ("isa_has", "isa_lacks"):
            _flags(r.get(key, []), f"finding[{i}].{key}")
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
