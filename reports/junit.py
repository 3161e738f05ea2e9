"""JUnit XML of a run: its suite-level ``qconform.*`` properties (what a CI dashboard needs to tell
two nights apart: run id, seed, scheme, tolerance, commit, each target's versions and devices,
from run.json), each group failure's reproduction command, and the whole file of a merged run
(``qconform merge``: one JUnit file for the N shards, named as pytest names the suite's tests).
"""

from __future__ import annotations

import json
import os
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

from reports.groups import CERTIFIED, label, read_group_verdicts
from reports.results import iter_last_rows
from suite.core.verdict import ERRORS, Status

PREFIX = "qconform."
JUNIT = "junit.xml"
MODULE = "suite.test_conformance"   # the classname prefix pytest gives the suite's tests
_ERRORS = frozenset(s.value for s in ERRORS)
_CASE_PROPS = ("status", "bit_exact", "max_abs_lsb", "mismatches", "elements", "p50_us", "finding", "waiver",
               "failure_file", "repro")


def suite_properties(doc: dict) -> list[tuple[str, str]]:
    """(name, value) of the run's properties from its run.json document ``doc``."""
    o = doc.get("options") or {}
    git = doc.get("git") or {}
    props: list[tuple[str, object]] = [
        ("run_id", doc.get("run_id")), ("seed", o.get("seed")), ("cases_per_op", o.get("cases_per_op")),
        ("ops", ",".join(o.get("ops") or []) or "all"), ("scheme", o.get("scheme")),
        ("tolerance_sha256", o.get("tolerance_digest")), ("git_commit", git.get("commit")),
        ("git_dirty", git.get("dirty")), ("suite_version", doc.get("suite_version")),
        ("run_group", o.get("run_group")), ("exit_status", doc.get("exit_status"))]
    if isinstance(o.get("shard"), dict):
        props.append(("shard", o["shard"].get("text")))
    props += [(f"host.{k}", v) for k, v in (doc.get("host") or {}).items()]
    for s in doc.get("shards") or []:   # a merged run: each shard's host and commit
        props += [(f"shard.{s.get('shard')}.host", (s.get("host") or {}).get("hostname")),
                  (f"shard.{s.get('shard')}.git_commit", (s.get("git") or {}).get("commit")),
                  (f"shard.{s.get('shard')}.run_id", s.get("run_id"))]
    for name, t in (doc.get("targets") or {}).items():
        props += [(f"target.{name}.version.{k}", v) for k, v in (t.get("versions") or {}).items()]
        for dev, facts in (t.get("devices") or {}).items():
            props += [(f"target.{name}.device.{dev}.{k}", v) for k, v in (facts or {}).items()]
    return [(PREFIX + k, v if isinstance(v, str) else json.dumps(v)) for k, v in props if v is not None]


def group_repro(doc: dict, op: str, target: str, device: str | None = None) -> str:
    """The pytest command that runs (op, target)'s cases and its group verdict as ``doc``'s run did
    (on ``device`` only, if given; else on the run's devices)."""
    o = doc.get("options") or {}
    selector = (o.get("selectors") or {}).get(target) if isinstance(o.get("selectors"), dict) else None
    args = ["pytest", f"--target={selector if isinstance(selector, str) else target}", f"--ops={op}"]
    if o.get("seed") is not None:
        args.append(f"--seed={o['seed']}")
    if o.get("cases_per_op") is not None:
        args.append(f"--cases-per-op={o['cases_per_op']}")
    args += [f"--case-file={f}" for f in o.get("case_files") or []]
    if o.get("model"):
        args.append(f"--model={o['model']}")
        if o.get("model_inputs") is not None:
            args.append(f"--model-inputs={o['model_inputs']}")
        args += [f"--model-input-shape={x}" for x in _strings(o.get("model_input_shape"))]
    args += [f"--device={d}" for d in ([device] if device else _strings(o.get("devices")))]
    if o.get("scheme"):
        args.append(f"--scheme={o['scheme']}")
    if o.get("tolerance_copy"):
        args.append(f"--tolerance={o['tolerance_copy']}")
    args += [f"--waivers={w}" for w in _strings(o.get("waivers"))]
    if o.get("certify") is True:
        args.append("--certify")
    return " ".join(shlex.quote(str(a)) for a in args)


def _strings(v) -> list[str]:
    """A run.json list of strings (anything else: none; the file comes from someone else)."""
    return [str(x) for x in v if isinstance(x, str)] if isinstance(v, list) else []


def case_repro(doc: dict, row: dict) -> str:
    """The row's own reproduction command (its failure file judged again) if it has one, else the
    pytest command that runs its case on its target as ``doc``'s run did (a case that passes with
    more mismatches than before has no failure file)."""
    if isinstance(row.get("repro"), str) and row["repro"]:
        return row["repro"]
    cmd = group_repro(doc, str(row.get("op")), str(row.get("target")), str(row["device"]) if row.get("device") else None)
    return cmd + " -k " + shlex.quote(f"{row.get('case_id')}:{row.get('target')}")


def group_properties(op: str, target: str, kind: str, text: str, repro: str, finding: str | None = None
                     ) -> list[tuple[str, str]]:
    """A group verdict's testcase properties (JUnit ``<property>``)."""
    props = [("op", op), ("target", target), ("finding_kind", kind), ("verdict", text), ("repro", repro)]
    if finding:
        props.append(("finding", finding))
    return [(PREFIX + k, str(v)) for k, v in props]


def _props(el: ET.Element, props) -> None:
    holder = ET.SubElement(el, "properties")
    for name, value in props:
        ET.SubElement(holder, "property", name=name, value=value)


def write_junit(folder: str | Path, doc: dict, path: str | Path) -> Path:
    """One JUnit file of the run folder ``folder`` (its last rows and group verdicts; ``doc``: its
    run.json document): a testcase per (case, target, device) and per group verdict, named as
    pytest names them, with the run's properties. Written atomically."""
    folder = Path(folder)
    cases = []
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for r in iter_last_rows(folder):
        op, target, st = str(r.get("op")), str(r.get("target")), r.get("status")
        tc = ET.Element("testcase", classname=f"{MODULE}.{op}:{target}",
                        name=f"test_case[{r.get('case_id')}:{target}]" + (f"@{r['device']}" if r.get("device") else ""),
                        time=f"{float(r.get('seconds') or 0):.3f}")
        _props(tc, [(PREFIX + k, v if isinstance(v, str) else json.dumps(v)) for k in _CASE_PROPS
                    if (v := r.get(k)) is not None])
        msg = str(r.get("reason") or r.get("message") or st)
        if r.get("repro"):
            msg += f"\nreproduce: {r['repro']}"
        if st in (Status.FAIL.value, *_ERRORS) and (r.get("finding") or r.get("waiver")):
            ET.SubElement(tc, "skipped", type="pytest.xfail", message=f"known finding {r.get('finding') or r.get('waiver')}")
            counts["skipped"] += 1
        elif st == Status.FAIL.value:
            ET.SubElement(tc, "failure", message=msg.splitlines()[0][:500]).text = msg
            counts["failures"] += 1
        elif st in _ERRORS:
            ET.SubElement(tc, "error", message=f"{st}: {msg.splitlines()[0][:500]}").text = msg
            counts["errors"] += 1
        elif st in (Status.UNSUPPORTED.value, Status.WAIVED.value):
            ET.SubElement(tc, "skipped", type="pytest.skip" if st == Status.UNSUPPORTED.value else "pytest.xfail",
                          message=msg.splitlines()[0][:500])
            counts["skipped"] += 1
        cases.append(tc)
    counts["tests"] = len(cases)
    groups: dict[tuple, list] = {}
    for key, v in (read_group_verdicts(folder) or {}).items():
        if key != CERTIFIED:
            groups.setdefault((key[0], key[1]), []).append((key, v))
    for (op, target), verdicts in sorted(groups.items()):   # one test_group per (op, target), as pytest names it
        verdicts.sort(key=lambda kv: tuple(map(str, kv[0])))
        repro = group_repro(doc, op, target)
        failing = [(k, v) for k, v in verdicts if v["failing"]]
        known = sorted({str(v["known"]) for _, v in verdicts if v.get("known")})
        tc = ET.Element("testcase", classname=f"{MODULE}.{op}:{target}", name="test_group", time="0")
        _props(tc, group_properties(op, target, "; ".join(k[3] for k, _ in verdicts),
                                    "; ".join(v["text"] for _, v in verdicts), repro, "; ".join(known) or None))
        if failing:
            text = "\n".join(f"{label(k, v)}: {v['text']}" for k, v in failing) + f"\nreproduce: {repro}"
            ET.SubElement(tc, "failure", message=(f"{op} on {target} as a whole: "
                                                  + "; ".join(v["text"] for _, v in failing))[:500]).text = text
            counts["failures"] += 1
        else:
            ET.SubElement(tc, "skipped", type="pytest.xfail", message=f"known finding {', '.join(known)}")
            counts["skipped"] += 1
        counts["tests"] += 1
        cases.append(tc)
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name="qconform", **{k: str(n) for k, n in counts.items()},
                          timestamp=str(doc.get("started") or ""))
    _props(suite, suite_properties(doc))
    suite.extend(cases)
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, p)
    return p
