"""Issue #34: a hardware team's daily loop (witnesses from outside the run, shrink, repro, the terminal)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import rows_written


def _tflite_ok():
    from targets import get_target
    ok, why = get_target("tflite-ref").availability()
    if not ok:
        pytest.skip(why)


def test_a_one_target_run_asks_the_local_targets_outside_it(run_suite):
    """--target=X alone: each failure's witness line names the runtimes outside the run that give
    the golden's value (here tflite-ref, in its worker), or why they could not run it."""
    _tflite_ok()
    proc, rd = run_suite("--target=tests.helper_targets:WrongTarget", "--ops=ADD", "--cases-per-op=3",
                         "--witness-cases=5", env={"QCONFORM_WITNESS_TARGETS": "tflite-ref,ref"})
    assert proc.returncode == 1, proc.stdout[-3000:]
    bad = [r for r in rows_written(rd) if r["status"] == "fail"]
    assert bad
    for r in bad:
        assert r["witnesses_golden"] == ["tflite-ref"], r
        assert "witnesses: golden's value: tflite-ref; this target's: none" in proc.stdout
    ok = [r for r in rows_written(rd) if r["status"] == "pass"]
    assert ok and all("witnesses_golden" not in r for r in ok)


def test_no_witness_says_why(run_suite):
    proc, rd = run_suite("--target=tests.helper_targets:WrongTarget", "--ops=ADD", "--cases-per-op=3")
    assert proc.returncode == 1
    bad = [r for r in rows_written(rd) if r["status"] == "fail"]
    assert bad and all("--witness-cases 0" in r["witnesses_none"] for r in bad)
    assert "witnesses: none: not asked (--witness-cases 0)" in proc.stdout
