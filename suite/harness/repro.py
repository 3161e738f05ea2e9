"""What decided a verdict travels with its failure, so that a rerun is exactly as strict or refuses.

Every failure file (``failures/<target>/<case>.json``: the case with ``got`` and ``want``) has a
``judged`` section: the target (as ``--target`` names it), the device string, the scheme, the
tolerance policy (the run folder's byte copy of it, ``tolerance.toml``, and its SHA-256), the
time limit, the seed, the runtime versions, the status and the rule that decided it. The repro
command printed for the failure passes all of them. A run given such a file for the same target
(``pytest --case-file``, ``qconform shrink``) must judge it the same way: a different scheme,
tolerance policy, device or time limit is refused with the command that reproduces it. Other
runtime versions are allowed (does the new release fix it?) and said in the report header.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

from suite.core.case import expand_case_paths
from suite.core.errors import QconformError

JUDGED = "judged"
TOLERANCE_COPY = "tolerance.toml"
REPRO_REPORT_DIR = "/tmp/qconform-repro"


def digest_of(path: str | Path) -> str:
    """SHA-256 of a file's bytes (a tolerance policy is judged by its exact text)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def judged_section(*, target: str, device: str | None, scheme: str, tolerance_file: str,
                   tolerance_digest: str, timeout: float, seed: int, cases_per_op: int, run_id: str,
                   status: str, versions: dict[str, str], finding: str | None, rule: int | None) -> dict[str, Any]:
    return {"target": target, "device": device, "scheme": scheme,
            "tolerance": {"file": tolerance_file, "sha256": tolerance_digest, "rule": rule},
            "timeout": timeout, "seed": seed, "cases_per_op": cases_per_op, "run_id": run_id,
            "status": status, "finding": finding, "versions": dict(versions)}


def repro_command(judged: dict[str, Any], failure_file: str | Path) -> str:
    """The pytest command that judges ``failure_file`` as its run did."""
    args = [f"--target={judged['target']}"]
    if judged.get("device"):
        args.append(f"--device={judged['device']}")
    args += [f"--scheme={judged['scheme']}", f"--tolerance={judged['tolerance']['file']}",
             f"--case-timeout={judged['timeout']:g}", f"--case-file={failure_file}", f"--report-dir={REPRO_REPORT_DIR}"]
    return "pytest " + " ".join(shlex.quote(a) for a in args)


def read_judged(path: str | Path) -> dict[str, Any] | None:
    """The ``judged`` section of a case file (None for a plain case file)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None   # (the case loader reports a file it cannot read)
    j = doc.get(JUDGED) if isinstance(doc, dict) else None
    return j if isinstance(j, dict) else None


def differences(judged: dict[str, Any], *, scheme: str, tolerance_digest: str, device: str | None,
                timeout: float) -> list[str]:
    """How judging now would differ from how the failure was judged (empty: the same)."""
    out = []
    if judged.get("scheme") != scheme:
        out.append(f"scheme {scheme} (it was judged under {judged.get('scheme')})")
    tol = judged.get("tolerance") or {}
    if tol.get("sha256") != tolerance_digest:
        out.append(f"another tolerance policy (it was judged under {tol.get('file')}, sha256 "
                   f"{str(tol.get('sha256'))[:12]}...)")
    if (judged.get("device") or None) != (device or None):
        out.append(f"device {device or 'none (this machine)'} (it ran on {judged.get('device') or 'this machine'})")
    if judged.get("status") == "timeout" and judged.get("timeout") != timeout:
        out.append(f"--case-timeout {timeout:g} (it timed out under {judged.get('timeout')})")
    return out


def check_reruns(case_files: list[str], *, targets: list[str], scheme: str, tolerance_digest: str,
                 device: str | None, timeout: float) -> list[tuple[Path, dict]]:
    """The failure files among ``case_files`` (their ``judged`` sections); QconformError naming the
    first one this run would judge differently on its own target, with its repro command."""
    found = []
    for p in expand_case_paths(case_files):
        j = read_judged(p)
        if j is None:
            continue
        found.append((p, j))
        if j.get("target") not in targets:
            continue   # another target: a comparison, not a rerun
        diff = differences(j, scheme=scheme, tolerance_digest=tolerance_digest, device=device, timeout=timeout)
        if diff:
            raise QconformError(f"would be judged with {'; '.join(diff)}: a rerun must be as strict as the run "
                                f"that failed it; reproduce it with: {repro_command(j, p)}", source=str(p),
                                field=JUDGED, rule="a failure is rerun under the settings that judged it")
    return found
