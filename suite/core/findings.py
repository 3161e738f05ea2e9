"""Known disagreements between runtimes and the spec (``suite/core/findings.toml``)."""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass
from pathlib import Path

from suite.core.errors import QconformError
from suite.core.spec import known_ops
from suite.core.userfile import tomllib   # (tomli on Python 3.10)

FILE = Path(__file__).parent / "findings.toml"


@dataclass(frozen=True)
class Finding:
    id: str
    op: tuple[str, ...]
    target: tuple[str, ...]
    reason: str
    variant: tuple[str, ...] = ("*",)
    status: tuple[str, ...] = ("fail",)   # the verdicts it explains: fail, crash, timeout, error

    def matches(self, op: str, target: str, variant: str, status: str = "fail") -> bool:
        return (status in self.status
                and any(fnmatch.fnmatchcase(op, p) for p in self.op)
                and any(fnmatch.fnmatchcase(target, p) for p in self.target)
                and any(fnmatch.fnmatchcase(variant, p) for p in self.variant))


def _tuple(v) -> tuple[str, ...]:
    return tuple(v) if isinstance(v, list) else (v,)


@functools.lru_cache(maxsize=None)
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
        out.append(Finding(id=r["id"], op=_tuple(r.get("op", "*")), target=_tuple(r.get("target", "*")),
                           reason=r["reason"], variant=_tuple(r.get("variant", "*")),
                           status=_tuple(r.get("status", "fail"))))
    return tuple(out)


def match(op: str, target: str, variant: str = "*", status: str = "fail") -> Finding | None:
    for f in findings():
        if f.matches(op, target, variant, status):
            return f
    return None
