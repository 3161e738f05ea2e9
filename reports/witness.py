"""Witnesses: which other runtimes of a run agree with the golden, and which with a target.

A target that disagrees with the golden on a case is judged against the golden alone; the other
runtimes that ran the same case say more: one that gives the golden's value bit for bit confirms
the golden (it is not the suite's own reading of the spec only), one that gives the target's
value says the two runtimes share the behaviour. ``ref`` (the golden run as a target) is no
witness. A case that two runtimes or more ran and none reproduced bit for bit is flagged: its
golden value is witnessed by nobody and wants review.
"""

from __future__ import annotations

#: targets that are the golden itself, never its witness
NOT_WITNESSES = frozenset({"ref"})


def split(seen: dict[str, tuple[bool, str | None]], target: str, digest: str | None) -> tuple[list[str], list[str]]:
    """(targets giving the golden's value, targets giving ``target``'s outputs ``digest``) among
    ``seen``: target -> (bit-exact with the golden, out_digest) of the same case."""
    others = {u: s for u, s in seen.items() if u != target and u not in NOT_WITNESSES}
    golden = sorted(u for u, (exact, _) in others.items() if exact)
    same = sorted(u for u, (_, d) in others.items() if digest is not None and d == digest)
    return golden, same


def text(golden: list[str], same: list[str], unwitnessed: bool, others: list[str] | None = None,
         none_ran: str | None = None) -> str:
    """The failure line's witnesses: ``golden's value: ort, tflm; this target's: tflite-ref``, then
    the runtimes that gave other values or could not run it (``others``: ``name: why``), or why no
    other runtime ran it at all (``none_ran``)."""
    if none_ran:
        return f"none: {none_ran}"
    out = f"golden's value: {', '.join(golden) or 'none'}; this target's: {', '.join(same) or 'none'}"
    if others:
        out += f"; others: {', '.join(others)}"
    return out + (" (no runtime of the run gives the golden's value: review the golden)" if unwitnessed else "")


def row_text(r: dict) -> str:
    """A row's witnesses as the reports show them ("" when the run recorded none)."""
    if "witnesses_golden" not in r:
        return ""
    return text(list(r.get("witnesses_golden") or []), list(r.get("witnesses_target") or []),
                bool(r.get("golden_unwitnessed")), list(r.get("witnesses_other") or []), r.get("witnesses_none"))


class Unwitnessed:
    """Rows in (one at a time); out: the cases two runtimes or more ran (outputs compared with the
    golden), none of them bit-exact: golden values no runtime of the run reproduces."""

    def __init__(self):
        self._cases: dict[tuple, list] = {}   # (case id, case digest) -> [op, ran, exact]

    def add(self, r: dict) -> None:
        if r.get("target") in NOT_WITNESSES or not r.get("out_digest"):
            return
        c = self._cases.setdefault((r.get("case_id"), r.get("case_digest")), [r.get("op"), set(), False])
        c[1].add(r.get("target"))
        c[2] = c[2] or bool(r.get("bit_exact"))

    def cases(self) -> list[dict]:
        return [{"case": k[0], "op": op, "ran": ", ".join(sorted(ran))}
                for k, (op, ran, exact) in self._cases.items() if len(ran) >= 2 and not exact]
