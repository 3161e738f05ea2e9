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
from reports.runinfo import TOLERANCE_COPY
from suite.core.errors import QconformError
from suite.core.tolerance import DEFAULT_FILE
from suite.core.userfile import read_bytes, read_text
from targets import BUILTIN

JUDGED = "judged"
#: the pytest repro's report folder: a private one made by the shell, never one that users and runs share
REPRO_REPORT_DIR = '"$(mktemp -d)"'


def digest_of(path: str | Path) -> str:
    """SHA-256 of a file's bytes (a tolerance policy is judged by its exact text)."""
    return hashlib.sha256(read_bytes(path, "tolerance policy", "--tolerance", "toml")).hexdigest()


def judged_section(*, target: str, device: str | None, scheme: str, tolerance_file: str,
                   tolerance_digest: str, timeout: float, seed: int, cases_per_op: int, run_id: str,
                   status: str, versions: dict[str, str], finding: str | None, rule: int | None,
                   batch: list[str] | None = None) -> dict[str, Any]:
    """``batch``: the ids of the cases the target ran in one call with this one, in order, itself
    among them (a kernel can read memory its batch-mates left: a failure that passes alone is not
    yet fixed; qconform repro)."""
    return {"target": target, "device": device, "scheme": scheme,
            "tolerance": {"file": tolerance_file, "sha256": tolerance_digest, "rule": rule},
            "timeout": timeout, "seed": seed, "cases_per_op": cases_per_op, "run_id": run_id,
            "status": status, "finding": finding, "versions": dict(versions),
            **({"batch": list(batch)} if batch else {})}


def pytest_command(judged: dict[str, Any], failure_file: str | Path) -> str:
    """The pytest command that judges ``failure_file`` as its run did (a run folder of its own)."""
    args = [f"--target={judged['target']}"]
    if judged.get("device"):
        args.append(f"--device={judged['device']}")
    args += [f"--scheme={judged['scheme']}", f"--tolerance={judged['tolerance']['file']}",
             f"--case-timeout={judged['timeout']:g}", f"--case-file={failure_file}"]
    return "pytest " + " ".join(shlex.quote(a) for a in args) + f" --report-dir={REPRO_REPORT_DIR}"


def repro_command(judged: dict[str, Any], failure_file: str | Path) -> str:
    """``qconform repro FILE``: it judges the failure file under its own judged section (scheme,
    tolerance by its sha256, time limit), as strict as the run; what a file may not select by
    itself (a target that is not built in, a device) is given on the command line."""
    args = [str(failure_file)]
    if judged.get("target") not in BUILTIN:
        args.append(f"--target={judged.get('target')}")
    if judged.get("device"):
        args.append(f"--device={judged['device']}")
    tol = judged.get("tolerance") or {}
    if policy_for(tol, failure_file) is None:   # (where the file lies, its sha256 finds no policy)
        args.append(f"--tolerance={tol.get('file')}")
    return "qconform repro " + " ".join(shlex.quote(a) for a in args)


def read_judged(path: str | Path) -> dict[str, Any] | None:
    """The ``judged`` section of a case file (None for a plain case file)."""
    try:
        doc = json.loads(read_text(path, "case file"))
    except (QconformError, ValueError, RecursionError):
        return None   # (the case loader reports a file it cannot read)
    j = doc.get(JUDGED) if isinstance(doc, dict) else None
    return j if isinstance(j, dict) else None


def own_settings(judged: dict[str, Any], src: str | Path, *, target: str | None, device: str | None,
                 tolerance: str | None) -> tuple[str | None, str | None, str | None]:
    """The target, device and tolerance file to judge failure file ``src`` with: the ones given
    on the command line, else its ``judged`` section's, but only where that runs and reads nothing
    the command line did not name. A file is data: a target that is not built in (module:Class,
    an entry point) imports code, a device string runs programs and reaches hosts, a tolerance path
    opens a file; each must be given on the command line (QconformError naming the field and the
    option to give), except the built-in targets, the built-in policy and the run folder's own
    copy of it beside the failure file (``<run>/failures/<target>/<case>.json``)."""
    src = Path(src)

    def refuse(fld: str, value, option: str, why: str):
        raise QconformError(f"{fld} is {json.dumps(value)}: {why}; give {option} on the command line to use it",
                            source=str(src), field=f"{JUDGED}.{fld}",
                            rule="a failure file never selects code to run, a device or a file to read")

    jt = judged.get("target")
    if target is None and jt is not None:
        if not isinstance(jt, str) or jt not in BUILTIN:
            refuse("target", jt, f"--target={jt}", "not a built-in target (it would import code)")
        target = jt
    if target != jt:
        return target, device, tolerance   # another target: the file's settings are not used
    jd = judged.get("device")
    if device is None and jd:
        refuse("device", jd, f"--device={jd}", "a device string runs programs on a host or device")
    if tolerance is None:
        tol = judged.get("tolerance") if isinstance(judged.get("tolerance"), dict) else {}
        tolerance = policy_for(tol, src)
        if tolerance is None:
            refuse("tolerance.file", tol.get("file"), f"--tolerance=FILE (sha256 {tol.get('sha256')})",
                   "its sha256 is neither the built-in policy's nor that of the tolerance.toml of the run "
                   "folder the file is in")
    return target, device, tolerance


def policy_for(tol: dict, src: str | Path) -> str | None:
    """The tolerance policy a failure file ``src`` was judged under, by the SHA-256 it quotes
    (``tol``: its judged.tolerance), wherever the file now lies: the built-in policy, or the run
    folder's copy when the file is in a run folder (``<run>/failures/<target>/<case>.json``);
    None when neither has that digest (the file's own path is never opened: a file is data)."""
    sha = tol.get("sha256")
    if not isinstance(sha, str):
        return None
    if sha == digest_of(DEFAULT_FILE):
        return str(DEFAULT_FILE)
    p = Path(src).resolve()
    if len(p.parents) > 2 and p.parent.parent.name in ("failures", "hunt"):
        beside = p.parents[2] / TOLERANCE_COPY
        try:
            if beside.is_file() and digest_of(beside) == sha:
                return str(beside)
        except (OSError, QconformError):
            return None
    return None


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
