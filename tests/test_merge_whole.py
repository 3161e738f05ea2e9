"""``qconform merge`` checks each shard whole before it writes anything (issue #31, #33's hostile
probe 2-6): refused shards name the field, and no -o folder is left behind."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET

import pytest

import reports.latency  # noqa: F401 (scipy before the in-process runs: numpy.fft loads once per process)
from reports import merge as merge_mod
from reports.results import iter_last_rows
from suite.cli import main as qconform
from suite.harness.shard import run_group
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

SLICE = ("--target=ref,tests.spine_targets:OffByOne", "--ops", "ADD,MUL", "--cases-per-op", "4", "--certify",
         "--run-group=night-1")


@pytest.fixture
def shards(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_KEY_FILE", str(tmp_path / "key"))
    for k in ("QCONFORM_RUN_GROUP", "GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "CIRCLE_WORKFLOW_ID",
              "BUILD_TAG"):
        monkeypatch.delenv(k, raising=False)
    return [run_inprocess(pytester, *SLICE, f"--shard={k}/2", report_dir=tmp_path / f"s{k}")[1] for k in (1, 2)]


def _copy(src, dst):
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _edit_json(folder, **fields):
    doc = json.loads((folder / "run.json").read_text())
    for k, v in fields.items():
        cur = doc
        *path, last = k.split("__")
        for p in path:
            cur = cur[p]
        cur[last] = v
    (folder / "run.json").write_text(json.dumps(doc))


def _refused(capsys, tmp_path, *dirs, field, extra=()):
    out = tmp_path / f"out-{field.replace(' ', '_').replace('/', '_')}"
    capsys.readouterr()
    assert qconform(["merge", "--allow-dirty", *extra, *map(str, dirs), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert field in err, err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".merging")]
    return err


def test_a_good_merge_writes_one_junit_file_and_every_shards_host_and_commit(shards, tmp_path, capsys):
    out = tmp_path / "merged"
    assert qconform(["merge", "--allow-dirty", *map(str, shards), "-o", str(out)]) == 1   # OffByOne fails
    info = json.loads((out / "run.json").read_text())
    assert [s["shard"] for s in info["shards"]] == ["1/2", "2/2"]
    assert all(s["host"]["hostname"] and s["git"]["commit"] and s["run_group"] == "night-1" for s in info["shards"])
    root = ET.parse(out / "junit.xml").getroot()
    suite = root.find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["qconform.run_group"] == "night-1" and props["qconform.shard.1/2.git_commit"]
    rows = list(iter_last_rows(out))
    cases = suite.findall("testcase")
    assert len([c for c in cases if c.get("name").startswith("test_case[")]) == len(rows)
    failed = [c for c in cases if c.find("failure") is not None and c.get("name").startswith("test_case[")]
    assert len(failed) == sum(r["status"] == "fail" for r in rows) and failed
    assert f"reproduce: qconform repro {out}" in failed[0].find("failure").text   # (its failure file, moved)
    assert any(p.get("name") == "qconform.repro" for p in failed[0].find("properties"))
    # the groups' verdicts (here: certification non-conformant) are tests too, with their command
    groups = [c for c in cases if c.get("name") == "test_group" and c.find("failure") is not None]
    assert groups and all("reproduce: pytest --target=tests.spine_targets:OffByOne" in g.find("failure").text for g in groups)


def _failing_first(shards):
    """(the shard with OffByOne's failures, the other)."""
    s1, s2 = shards
    return (s1, s2) if any(r["status"] == "fail" for r in iter_last_rows(s1)) else (s2, s1)


def test_a_shard_that_is_not_whole_is_refused_naming_the_field(shards, tmp_path, capsys):
    s2, s1 = _failing_first(shards)
    # cut to 5 rows (its summary would say INCOMPLETE)
    cut = _copy(s2, tmp_path / "cut")
    lines = (cut / "results.jsonl").read_bytes().splitlines(keepends=True)
    (cut / "results.jsonl").write_bytes(b"".join(lines[:5]))
    _refused(capsys, tmp_path, s1, cut, field="planned")
    _edit_json(cut, planned=None)   # (a shard run under xdist plans nothing: its groups' cases count)
    _refused(capsys, tmp_path, s1, cut, field="options.shard.cases")
    # a row of another run
    other = _copy(s2, tmp_path / "other")
    rows = [json.loads(x) for x in lines]
    rows[-1]["run_id"] = "20990101T000000-abcdef"
    (other / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _refused(capsys, tmp_path, s1, other, field="is a row of run")   # (the bounded reader: one run id)
    # two rows edited from fail to pass: its own certificate's counts say otherwise
    forged = _copy(s2, tmp_path / "forged")
    rows = [json.loads(x) for x in lines]
    fails = [r for r in rows if r["status"] == "fail"]
    assert len(fails) >= 2
    for r in fails[:2]:
        r["status"] = "pass"
    (forged / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _refused(capsys, tmp_path, s1, forged, field="certificate.json: ops[")
    # exit status 2 (run.json says it did not run to its end)
    bad = _copy(s2, tmp_path / "exit2")
    _edit_json(bad, exit_status=2)
    _refused(capsys, tmp_path, s1, bad, field="exit_status")


def test_shards_of_another_commit_group_or_a_dirty_checkout_are_refused(shards, tmp_path, capsys):
    s1, s2 = shards
    c = _copy(s2, tmp_path / "commit")
    _edit_json(c, git__commit="0" * 40)
    _refused(capsys, tmp_path, s1, c, field="git.commit")
    g = _copy(s2, tmp_path / "group")
    _edit_json(g, options__run_group="night-0")   # last night's shard
    _refused(capsys, tmp_path, s1, g, field="options.run_group")
    _refused(capsys, tmp_path, s1, s2, field="options.run_group", extra=("--run-group=night-2",))
    d1, d2 = _copy(s1, tmp_path / "d1"), _copy(s2, tmp_path / "d2")
    _edit_json(d1, git__dirty=True)
    _edit_json(d2, git__dirty=True)
    capsys.readouterr()
    assert qconform(["merge", str(d1), str(d2), "-o", str(tmp_path / "dirty")]) == 2
    assert "git.dirty" in capsys.readouterr().err and not (tmp_path / "dirty").exists()
    v = _copy(s2, tmp_path / "versions")
    doc = json.loads((v / "run.json").read_text())
    doc["targets"]["ref"]["versions"] = {"qconform": "0.0.1"}
    (v / "run.json").write_text(json.dumps(doc))
    _refused(capsys, tmp_path, s1, v, field="targets.ref.versions")


def test_merge_reads_no_link_fifo_or_device_and_leaves_no_partial_output(shards, tmp_path, capsys, monkeypatch):
    s1, s2 = _failing_first(shards)
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    t = _copy(s1, tmp_path / "tol")
    (t / "tolerance.toml").unlink()
    (t / "tolerance.toml").symlink_to(secret)
    _refused(capsys, tmp_path, t, s2, field="tolerance.toml")
    f = _copy(s1, tmp_path / "ff")
    victim = sorted((f / "failures").rglob("*.json"))
    assert victim, "OffByOne's failures have failure files"
    victim[0].unlink()
    victim[0].symlink_to(secret)
    _refused(capsys, tmp_path, f, s2, field="failure_file")
    for kind in ("fifo", "zero"):
        r = _copy(s2, tmp_path / kind)
        (r / "results.jsonl").unlink()
        if kind == "fifo":
            os.mkfifo(r / "results.jsonl")   # (opened, it would hang the merge)
        else:
            (r / "results.jsonl").symlink_to("/dev/zero")
        _refused(capsys, tmp_path, s1, r, field="results.jsonl")
    monkeypatch.setattr(merge_mod, "MAX_FAILURE_FILE", 10)   # every failure file is now oversized
    _refused(capsys, tmp_path, s1, s2, field="failure_file")


def test_the_run_group_defaults_to_the_cis_run_id():
    assert run_group("x-1", {"GITHUB_RUN_ID": "9"}) == "x-1"
    assert run_group(None, {"GITHUB_RUN_ID": "9", "GITHUB_REPOSITORY": "o/r"}) == "github-o/r-9"
    assert run_group(None, {"QCONFORM_RUN_GROUP": "k8s-uid", "GITHUB_RUN_ID": "9"}) == "k8s-uid"
    assert run_group(None, {"CI_PIPELINE_ID": "77"}) == "gitlab-77"
    assert run_group(None, {}) is None
