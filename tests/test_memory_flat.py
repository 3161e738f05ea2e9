"""Issue #32: nothing of a case stays in the pytest process once its row is written, beyond what
the summaries count. (Peak RSS at --cases-per-op 300 and 1000 is measured in docs/performance.md;
these check the mechanisms that keep it flat.)"""

from __future__ import annotations

from suite.cases.generate import generate
from suite.core.tolerance import load_policy
from suite.harness.groups import GroupRows
from suite.harness.judge import Goldens


def _row(case_id: str, op: str = "ADD", target: str = "ort", **more) -> dict:
    return {"op": op, "target": target, "case_id": case_id, "device": None, "status": "pass",
            "max_abs_lsb": 0.0, "mismatches": 0, "elements": 4, "out_dtype": "int8", **more}


def test_a_groups_rows_are_dropped_once_it_is_judged_and_its_verdict_stays():
    g = GroupRows()
    for i in range(50):
        g.add(_row(f"ADD-{i:03d}"))
    g.add(_row("MUL-000", op="MUL"))
    first = g.judge("ADD", "ort", load_policy(None), {}, None)
    assert first[0] == 50
    assert ("ADD", "ort") not in g.rows and ("MUL", "ort") in g.rows   # only the judged group's rows go
    assert g.judged("ADD", "ort") and not g.judged("MUL", "ort")
    g.add(_row("ADD-999"))   # (a row after its verdict, e.g. a test asked again: not kept)
    assert ("ADD", "ort") not in g.rows
    assert g.judge("ADD", "ort", load_policy(None), {}, None) == first   # (pytest-rerunfailures: the same)


def test_the_golden_memo_holds_the_operator_being_judged_only():
    add, mul = generate(["ADD"], 3, 0), generate(["MUL"], 3, 0)
    gold = Goldens()
    for c in add:
        gold.get(c, "tflite-ref-double")
    assert len(gold._digests) == len(add)
    for c in mul:
        gold.get(c, "tflite-ref-double")
    assert set(gold._digests) == {c.digest() for c in mul}   # ADD's are gone
    again = gold.get(add[0], "tflite-ref-double")             # an op that comes back is computed (or read) again
    assert gold.computed == len(add) + len(mul) + 1 and len(again) == len(add[0].outputs)
