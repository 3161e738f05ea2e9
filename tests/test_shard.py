"""Shards and one merged report (issue #22): ``pytest --shard=K/N`` on N hosts, ``qconform merge``."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from reports.results import iter_last_rows
from suite.cli import main as qconform
from suite.harness.shard import parse_shard, split
from suite.core.errors import QconformError
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

SLICE = ("--target=ref,tests.spine_targets:OffByOne", "--ops", "ADD,MUL,RESHAPE", "--cases-per-op", "4")


def test_the_split_is_whole_disjoint_balanced_and_the_same_everywhere():
    groups = {(op, t): n for op, n in (("ADD", 40), ("MUL", 30), ("CONV_2D", 25), ("RESHAPE", 8), ("SUB", 30))
              for t in ("ort", "tflite", "htp")}
    shares = split(groups, 4)
    assert shares == split(dict(reversed(list(groups.items()))), 4)       # the order given does not matter
    assert sorted(k for s in shares for k in s) == sorted(groups)         # every group once
    loads = [sum(groups[k] for k in s) for s in shares]
    assert max(loads) - min(loads) <= max(groups.values())
    assert split(groups, 1) == [sorted(groups)] and len(split({("ADD", "ort"): 3}, 3)[2]) == 0
    assert parse_shard("2/3").text == "2/3"
    for bad in ("0/2", "3/2", "1", "a/b", "1/2/3"):
        with pytest.raises(QconformError, match="--shard"):
            parse_shard(bad)


def _verdicts(rd) -> dict:
    """summary.csv's verdict columns per (op, target) (its latencies are each run's own)."""
    cols = ("cases", "passed", "failed_new", "errors_new", "unsupported", "bias", "group_failure")
    return {(r["op"], r["target"]): [r.get(c) for c in cols] for r in csv.DictReader((rd / "summary.csv").open())}


def _statuses(rd) -> dict:
    return {(r["case_id"], r["target"]): r["status"] for r in iter_last_rows(rd)}


def test_two_shards_merged_give_the_statuses_of_one_run(pytester, tmp_path, capsys):
    one, rd = run_inprocess(pytester, *SLICE, "-p", "no:randomly", report_dir=tmp_path / "one")
    shards = []
    for k in (1, 2):
        xml = tmp_path / f"s{k}.xml"
        proc, srd = run_inprocess(pytester, *SLICE, f"--shard={k}/2", f"--junitxml={xml}", report_dir=tmp_path / f"s{k}")
        assert f"shard {k}/2: 3 of 6 (op, target) groups" in proc.stdout
        assert f'name="qconform.shard" value="{k}/2"' in xml.read_text()
        shards.append(srd)
    assert one.returncode == 1 and set(_statuses(shards[0])).isdisjoint(_statuses(shards[1]))
    out = tmp_path / "merged"
    assert qconform(["merge", "--allow-dirty", str(shards[0]), str(tmp_path / "s2"), "-o", str(out)]) == 1   # a report folder: its latest
    assert _statuses(out) == _statuses(rd) and "fail" in _statuses(out).values()
    info = json.loads((out / "run.json").read_text())
    assert [s["shard"] for s in info["shards"]] == ["1/2", "2/2"] and all(s["complete"] for s in info["shards"])
    assert info["shards"][0]["host"]["hostname"] and info["exit_status"] == 1 and not info["interrupted"]
    assert info["planned"] == json.loads((rd / "run.json").read_text())["planned"] == len(_statuses(rd))
    assert (out / "index.html").is_file() and _verdicts(out) == _verdicts(rd)
    # the merged rows' failure files are in the merged folder, and their repro lines point there
    failing = [r for r in iter_last_rows(out) if r["status"] == "fail"]
    assert failing and all(r["failure_file"].startswith(str(out)) and str(out) in r["repro"] for r in failing)

    # refused, with nothing written: a missing shard, a shard twice, another case set
    capsys.readouterr()
    assert qconform(["merge", "--allow-dirty", str(shards[0]), "-o", str(tmp_path / "m1")]) == 2
    assert "shard(s) 2/2 missing" in capsys.readouterr().err and not (tmp_path / "m1").exists()
    assert qconform(["merge", "--allow-dirty", str(shards[0]), str(shards[0]), "-o", str(tmp_path / "m2")]) == 2
    assert "given twice" in capsys.readouterr().err
    other = tmp_path / "other"
    shutil.copytree(shards[1], other)
    doc = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**doc, "options": {**doc["options"], "seed": 1}}))
    assert qconform(["merge", "--allow-dirty", str(shards[0]), str(other), "-o", str(tmp_path / "m3")]) == 2
    assert "options.seed" in capsys.readouterr().err and not (tmp_path / "m3").exists()
    # an interrupted shard: refused, naming the field
    (other / "run.json").write_text(json.dumps({**doc, "interrupted": True}))
    assert qconform(["merge", "--allow-dirty", str(shards[0]), str(other), "-o", str(tmp_path / "m4")]) == 2
    assert "interrupted" in capsys.readouterr().err and not (tmp_path / "m4").exists()
