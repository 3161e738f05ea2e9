"""Suite-level ``<property>`` elements of the JUnit file (``--junitxml``): what a CI dashboard needs
to tell two nights apart (run id, seed, cases per op, scheme, tolerance, commit, each target's
versions and devices), from run.json's document.

pytest's public ``record_testsuite_property`` does not work under pytest-xdist (pytest issue
7767: the file is the controller's, the fixture runs on workers), so the controller adds them to
the file pytest wrote, after it wrote it (the plugin's pytest_unconfigure), under the same
``<testsuite><properties>`` the fixture would have used.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

PREFIX = "qconform."


def suite_properties(doc: dict) -> list[tuple[str, str]]:
    """(name, value) of the run's properties from its run.json document ``doc``."""
    o = doc.get("options") or {}
    git = doc.get("git") or {}
    props: list[tuple[str, object]] = [
        ("run_id", doc.get("run_id")), ("seed", o.get("seed")), ("cases_per_op", o.get("cases_per_op")),
        ("ops", ",".join(o.get("ops") or []) or "all"), ("scheme", o.get("scheme")),
        ("tolerance_sha256", o.get("tolerance_digest")), ("git_commit", git.get("commit")),
        ("git_dirty", git.get("dirty")), ("suite_version", doc.get("suite_version"))]
    if isinstance(o.get("shard"), dict):
        props.append(("shard", o["shard"].get("text")))
    props += [(f"host.{k}", v) for k, v in (doc.get("host") or {}).items()]
    for name, t in (doc.get("targets") or {}).items():
        props += [(f"target.{name}.version.{k}", v) for k, v in (t.get("versions") or {}).items()]
        for dev, facts in (t.get("devices") or {}).items():
            props += [(f"target.{name}.device.{dev}.{k}", v) for k, v in (facts or {}).items()]
    return [(PREFIX + k, v if isinstance(v, str) else json.dumps(v)) for k, v in props if v is not None]


def add_suite_properties(path: str | Path, props: list[tuple[str, str]]) -> None:
    """Add ``props`` to the first ``<testsuite>`` of the JUnit file ``path`` (rewritten whole)."""
    p = Path(path)
    tree = ET.parse(p)
    root = tree.getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return
    holder = suite.find("properties")
    if holder is None:
        holder = ET.Element("properties")
        suite.insert(0, holder)
    for name, value in props:
        ET.SubElement(holder, "property", name=name, value=value)
    tmp = p.with_name(p.name + ".tmp")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, p)
