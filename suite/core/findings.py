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
    #: for hunted cases (qconform hunt), which carry their params: any one of these tables of
    #: conditions, all of whose params hold; a finding without one matches them by ``variant``
    where: tuple[dict, ...] = ()
    #: runtimes that give the golden's value on ``case`` (a case file, from the checkout's root):
    #: independent confirmation of the golden where the finding's target disagrees with it
    witnesses: tuple[str, ...] = ()
    case: str = ""
    #: the CPU the case ran on has every one of ``isa_has`` and none of ``isa_lacks`` (ISA flags,
    #: targets.device_runner.isa_flags); a finding with either matches no verdict whose ISA is unknown
    isa_has: tuple[str, ...] = ()
    isa_lacks: tuple[str, ...] = ()

    def matches(self, op: str, target: str, variant: str, status: str = "fail", params: dict | None = None,
                isa: frozenset[str] | None = None) -> bool:
        if not (status in self.status and any(fnmatch.fnmatchcase(op, p) for p in self.op)
                and any(fnmatch.fnmatchcase(target, p) for p in self.target)):
            return False
        if (self.isa_has or self.isa_lacks) and (isa is None or not isa.issuperset(self.isa_has)
                                                 or not isa.isdisjoint(self.isa_lacks)):
            return False
        if params is not None and self.where:
            return any(all(_holds(params.get(k), c) for k, c in w.items()) for w in self.where)
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
        out.append(Finding(id=r["id"], witnesses=tuple(wit), case=str(r.get("case", "")), op=_tuple(r.get("op", "*")), target=_tuple(r.get("target", "*")),
                           # a region (where) with no variant is the hunt's alone: "*" would make it
                           # explain every generated failure of its ops, in the region or not
                           reason=r["reason"], variant=_tuple(r.get("variant", "hunt-only" if where else "*")),
                           status=_tuple(r.get("status", "fail")), where=tuple(where),
                           isa_has=tuple(r.get("isa_has", ())), isa_lacks=tuple(r.get("isa_lacks", ()))))
    return tuple(out)


def match(op: str, target: str, variant: str = "*", status: str = "fail", params: dict | None = None,
          isa: frozenset[str] | None = None) -> Finding | None:
    """The first finding that explains this verdict (``params``: a hunted case's, suite/cases/hunt;
    ``isa``: the ISA flags of the CPU it ran on)."""
    for f in findings():
        if f.matches(op, target, variant, status, params, isa):
            return f
    return None
