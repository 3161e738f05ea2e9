"""Suite-level ``<property>`` elements of the JUnit file (``--junitxml``): what a CI dashboard needs
to tell two nights apart (run id, seed, cases per op, scheme, tolerance, commit, each target's
versions and devices), from run.json's document.

pytest's public ``record_testsuite_property`` does not work under pytest-xdist (pytest issue
7767: the file is the controller's, the fixture runs on workers), so the controller adds them to
the file pytest wrote, after it wrote it (the plugin's pytest_unconfigure), under the same
``<testsuite><properties>`` the fixture would have used.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from reports.junit import PREFIX, suite_properties  # noqa: F401 (the run's properties: reports/junit.py)


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
