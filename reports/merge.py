"""``qconform merge RUN... -o DIR``: one run folder of the N shards of a run (``pytest --shard=K/N``
on N hosts, suite/harness/shard.py).

Every shard is checked whole before anything is written, and refused with one error naming the
shard's file and the field:

* it is a shard (run.json's options.shard), every share 1..N once;
* it is complete: finished, not interrupted, an exit status of a run (0, 1; 5 no tests), not
  filtered, a row for every planned result (``planned``), every row of its own ``run_id`` and of
  its own (op, target) groups;
* its rows agree with its own certificate's counts and failing cases, where it certified;
* all shards are one run: one run group (``options.run_group``: ``--run-group``, by default the
  CI's run id), one commit (``git.commit``), none ``git.dirty`` (unless ``allow_dirty``), one
  suite version, case set (seed, ops, cases per op, case files, model, targets and their split),
  tolerance policy (its SHA-256), scheme and target versions.

The merge reads only regular files of the shards' folders, never through a symbolic link (a
shard's tolerance.toml, results.jsonl or failure file that is a link is refused) and each under
a size bound. DIR is built in a folder beside it and renamed into place at the end: a refused or
failed merge leaves no DIR.

DIR gets every shard's rows (run id: the merged run's; ``shard``: K/N), the failure files they
name and the tolerance policy (repro lines rewritten to point there), then summary, index.html,
results.parquet, the certificate (when the shards certified), junit.xml (reports/junit.py: one
JUnit file of the whole run) and run.json, whose ``shards`` lists each shard's run, host, commit
and devices.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from reports.build import Report, write_reports
from reports.certify import CERT_JSON, read_certificate
from reports.junit import JUNIT, write_junit
from reports.results import RESULTS, ResultWriter, scan
from reports.runinfo import RUN_JSON, TOLERANCE_COPY, load_run_json
from suite.core.errors import QconformError
from suite.core.keyed import FileRefused, read_regular
from suite.core.verdict import ERRORS, Status

MAX_FAILURE_FILE = 64 << 20   # bytes of a failure file copied over
MAX_TOLERANCE = 4 << 20
#: run.json options that make the case set and its judging: equal in every shard
SAME = ("seed", "ops", "cases_per_op", "case_files", "model", "scheme", "tolerance_digest", "run_group")
_ERRORS = frozenset(s.value for s in ERRORS)
_RULE_WHOLE = "a shard that ran to its end, as it recorded it"


@dataclass
class Shard:
    folder: Path
    info: dict
    rows: list            # its rows, in file order
    cert: dict | None     # its certificate.json, if it certified

    @property
    def text(self) -> str:
        return self.info["options"]["shard"]["text"]


def _own(folder: Path, rel: str | Path, field: str) -> Path:
    """``folder``/``rel``, refused if any part of it below ``folder`` is a symbolic link."""
    p = folder
    for part in Path(rel).parts:
        p = p / part
        if p.is_symlink():
            raise QconformError("is a symbolic link: a merge reads no file a shard links to", source=str(p),
                                field=field, rule="a shard's files are regular files in its own folder")
    return p


def _read_own(folder: Path, rel: str | Path, field: str, limit: int) -> bytes:
    p = _own(folder, rel, field)
    try:
        return read_regular(p, limit)    # (O_NOFOLLOW: a link put there since is refused too)
    except FileRefused as e:
        raise QconformError(f"{Path(rel).name}: {e.why}", source=str(p), field=field,
                            rule=f"a regular file of at most {limit:,} bytes") from None
    except OSError as e:
        raise QconformError(f"cannot read {Path(rel).name}: {e.strerror or e}", source=str(p), field=field) from None


def read_shard(d: str | Path) -> tuple[Path, dict]:
    """(the run folder, its run.json) of a shard given as a run folder or a report folder (its latest)."""
    p = Path(d)
    if p.is_dir() and not (p / RUN_JSON).exists() and (p / "latest").is_dir():
        p = p / "latest"
    folder = p.resolve()
    if not folder.is_dir():
        raise QconformError("no such run folder", source=str(d), field="RUN")
    _own(folder, RUN_JSON, "RUN")
    info = load_run_json(folder, "RUN")
    sh = info["options"].get("shard")
    if not isinstance(sh, dict) or not isinstance(sh.get("index"), int) or not isinstance(sh.get("count"), int):
        raise QconformError("is not a shard (no options.shard)", source=str(folder / RUN_JSON), field="options.shard",
                            rule="qconform merge takes the run folders of `pytest --shard=K/N`")
    return folder, info


def _incomplete(info: dict) -> tuple[str, str] | None:
    """(field, why) of what makes ``info``'s run incomplete; None if it ran to its end."""
    if info.get("finished") is None:
        return "finished", "it did not finish (finished: null)"
    if info.get("interrupted"):
        return "interrupted", "it was interrupted"
    if info.get("exit_status") not in (0, 1, 5):
        return "exit_status", f"exit status {info.get('exit_status')!r} is not a run's (0, 1 or 5)"
    if (info.get("options") or {}).get("filtered"):
        return "options.filtered", "it was filtered (-k, --lf, a deselection): part of its cases"
    return None


def load_shard(folder: Path, info: dict) -> Shard:
    """The shard with its rows and certificate, checked whole: QconformError naming the field of
    the first thing that makes it not a complete shard of its own run."""
    src = str(folder / RUN_JSON)
    bad = _incomplete(info)
    if bad:
        raise QconformError(f"shard {info['options']['shard'].get('text')} is incomplete: {bad[1]}", source=src,
                            field=bad[0], rule=_RULE_WHOLE)
    p = _own(folder, RESULTS, "results.jsonl")
    if not os.path.lexists(p):   # (what it is and its size: the one results reader checks, reports/results.py)
        raise QconformError("no results.jsonl", source=str(p), field="results.jsonl")
    rows = [row for _, row in scan(p)]
    rid = info.get("run_id")
    groups = {tuple(g) for g in info["options"]["shard"].get("groups") or []}
    for n, row in enumerate(rows, 1):   # (one row a (case, target, device): the reader refuses a repeat)
        if row.get("run_id") != rid:
            raise QconformError(f"row {n} is of run {row.get('run_id')!r}, the shard is run {rid!r}", source=str(p),
                                field="results.jsonl: run_id", rule="a shard's rows are its own run's")
        if (row.get("op"), row.get("target")) not in groups:
            raise QconformError(f"row {n} ({row.get('case_id')}:{row.get('target')}) is of a group not in shard "
                                f"{info['options']['shard'].get('text')}", source=str(p),
                                field="options.shard.groups", rule="a shard's rows are of its own (op, target) groups")
    planned = info.get("planned")
    if type(planned) is int and len(rows) != planned:
        raise QconformError(f"{len(rows)} results of the {planned} planned", source=str(p), field="planned",
                            rule=_RULE_WHOLE + ": a row for every planned result")
    cases = info["options"]["shard"].get("cases")   # (its (case, target) pairs: what a run under xdist has instead)
    pairs = len({(r.get("case_id"), r.get("target")) for r in rows})
    if type(cases) is int and pairs != cases:
        raise QconformError(f"{pairs} (case, target) pairs of the shard's {cases}", source=str(p),
                            field="options.shard.cases", rule=_RULE_WHOLE + ": a row for every case of its groups")
    cert = None
    if (folder / CERT_JSON).exists() or (folder / CERT_JSON).is_symlink():
        _own(folder, CERT_JSON, CERT_JSON)
        cert = read_certificate(folder / CERT_JSON, CERT_JSON)
        _agrees(folder, info, cert, rows)
    return Shard(folder, info, rows, cert)


def _agrees(folder: Path, info: dict, cert: dict, rows) -> None:
    """QconformError unless the shard's rows give its certificate's counts and failing cases."""
    src = str(folder / CERT_JSON)
    if cert.get("run_id") != info.get("run_id"):
        raise QconformError(f"is of run {cert.get('run_id')!r}, the shard is run {info.get('run_id')!r}", source=src,
                            field="certificate.json: run_id", rule="a shard's certificate is of its own rows")
    got: dict[tuple, Counter] = {}
    failing: dict[tuple, set] = {}
    for r in rows:
        key = (r.get("target"), r.get("spec") or "", r.get("op"))
        c = got.setdefault(key, Counter())
        st = r.get("status")
        c["cases"] += 1
        c["passed"] += st == Status.PASS.value
        c["failed"] += st == Status.FAIL.value
        c["errors"] += st in _ERRORS
        c["unsupported"] += st == Status.UNSUPPORTED.value
        c["waived"] += st == Status.WAIVED.value
        if st == Status.FAIL.value or st in _ERRORS:
            failing.setdefault(key, set()).add(str(r.get("case_id")))
    ops = cert.get("ops")
    if not isinstance(ops, list):
        raise QconformError("has no ops list", source=src, field="certificate.json: ops")
    seen = set()
    for i, o in enumerate(ops):
        if not isinstance(o, dict) or not isinstance(o.get("counts"), dict):
            raise QconformError(f"ops[{i}] is not an op entry", source=src, field=f"certificate.json: ops[{i}]")
        key = (o.get("target"), o.get("spec") or "", o.get("op"))
        seen.add(key)
        c = got.get(key, Counter())
        for name in ("cases", "passed", "failed", "errors", "unsupported", "waived"):
            if o["counts"].get(name) != c[name]:
                raise QconformError(f"{key[2]} on {key[0]}: the certificate counts {o['counts'].get(name)!r} {name}, "
                                    f"the rows {c[name]}", source=src, field=f"certificate.json: ops[{i}].counts.{name}",
                                    rule="a shard's rows are the rows its certificate was made of")
        ids = {str(f.get("case_id")) for f in o.get("failing") or [] if isinstance(f, dict)}
        if ids != failing.get(key, set()):
            raise QconformError(f"{key[2]} on {key[0]}: the certificate's failing cases differ from the rows' "
                                f"({len(ids)} vs {len(failing.get(key, ()))})", source=src,
                                field=f"certificate.json: ops[{i}].failing",
                                rule="a shard's rows are the rows its certificate was made of")
    extra = sorted(set(got) - seen, key=str)
    if extra:
        raise QconformError(f"rows of {extra[0][2]} on {extra[0][0]} are not in the certificate", source=src,
                            field="certificate.json: ops", rule="a shard's rows are the rows its certificate was made of")


def check_shards(shards: list[tuple[Path, dict]], run_group: str | None = None, allow_dirty: bool = False) -> None:
    """QconformError unless ``shards`` are the N shares of one run, each once (their run.json
    only: :func:`load_shard` checks each one's rows)."""
    if not shards:
        raise QconformError("no shard given", field="RUN")
    (d0, i0), o0 = shards[0], shards[0][1]["options"]
    n = o0["shard"]["count"]
    seen: dict[int, Path] = {}
    for d, info in shards:
        o, src = info["options"], str(d / RUN_JSON)
        sh = o["shard"]
        if sh["count"] != n:
            raise QconformError(f"is shard {sh.get('text')} of a run in {sh['count']}, {d0} of one in {n}",
                                source=src, field="options.shard", rule="the shards of one run")
        if sh["index"] in seen:
            raise QconformError(f"shard {sh['index']}/{n} is given twice: {seen[sh['index']]} and {d}", source=src,
                                field="options.shard", rule="each shard once")
        seen[sh["index"]] = d
        if run_group is not None and o.get("run_group") != run_group:
            raise QconformError(f"is of run group {o.get('run_group')!r}, not {run_group!r}", source=src,
                                field="options.run_group", rule="--run-group: the shards of that run")
        for k in SAME:
            if o.get(k) != o0.get(k):
                raise QconformError(f"{k} {o.get(k)!r} differs from {d0}'s {o0.get(k)!r}", source=src,
                                    field=f"options.{k}", rule="the shards of one run have one case set and policy")
        git, git0 = info.get("git") or {}, i0.get("git") or {}
        if git.get("commit") != git0.get("commit"):
            raise QconformError(f"commit {git.get('commit')!r} differs from {d0}'s {git0.get('commit')!r}", source=src,
                                field="git.commit", rule="the shards of one run are of one commit")
        if git.get("dirty") and not allow_dirty:
            raise QconformError("was run from a checkout with uncommitted changes: its code is not its commit's",
                                source=src, field="git.dirty", rule="the shards of one run are of one commit "
                                "(--allow-dirty to merge them all the same)")
        if info.get("suite_version") != i0.get("suite_version"):
            raise QconformError(f"suite version {info.get('suite_version')!r} differs from {d0}'s "
                                f"{i0.get('suite_version')!r}", source=src, field="suite_version",
                                rule="the shards of one run are of one suite")
        if sorted(o.get("targets") or []) != sorted(o0.get("targets") or []):
            raise QconformError(f"targets {o.get('targets')} differ from {d0}'s {o0.get('targets')}", source=src,
                                field="options.targets", rule="the shards of one run test the same targets")
        if sh.get("set_sha256") != o0["shard"].get("set_sha256"):
            raise QconformError(f"its (op, target) groups differ from {d0}'s (split sha256 "
                                f"{str(sh.get('set_sha256'))[:12]}... vs {str(o0['shard'].get('set_sha256'))[:12]}...)",
                                source=src, field="options.shard.set_sha256", rule="the shards of one run have one case set")
        tv, tv0 = info.get("targets") or {}, i0.get("targets") or {}
        for t in sorted(set(tv) | set(tv0)):
            have, want = (tv.get(t) or {}).get("versions"), (tv0.get(t) or {}).get("versions")
            if have != want:
                raise QconformError(f"target {t} has versions {have}, {d0} has {want}", source=src,
                                    field=f"targets.{t}.versions", rule="one target, one set of versions in a merged run")
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in seen]
    if missing:
        raise QconformError(f"shard(s) {', '.join(missing)} missing (given: "
                            f"{', '.join(f'{k}/{n}' for k in sorted(seen))})", field="RUN",
                            rule="a merged run has every shard")


def merge(dirs: list[str | Path], out: str | Path, run_id: str, run_group: str | None = None,
          allow_dirty: bool = False) -> tuple[Report, dict]:
    """Merge the shards ``dirs`` into the new run folder ``out`` (run id ``run_id``): (its report,
    its run.json document). QconformError, with nothing written, if they are not one run's whole
    shards; ``run_group``: the run group they must be of."""
    heads = sorted((read_shard(d) for d in dirs), key=lambda s: s[1]["options"]["shard"]["index"])
    check_shards(heads, run_group, allow_dirty)
    loaded = [load_shard(d, info) for d, info in heads]
    dest = Path(out).absolute()
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise QconformError("exists and is not an empty folder", source=str(dest), field="-o",
                            rule="the merged run gets a folder of its own")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".merging", dir=dest.parent))
    try:
        report, doc = _write(loaded, dirs, tmp, dest, run_id)
        with contextlib.suppress(FileNotFoundError):
            dest.rmdir()   # (an empty folder given: replaced)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report, doc


def _write(shards: list[Shard], dirs, tmp: Path, dest: Path, run_id: str) -> tuple[Report, dict]:
    first = shards[0]
    if (first.folder / TOLERANCE_COPY).exists() or (first.folder / TOLERANCE_COPY).is_symlink():
        (tmp / TOLERANCE_COPY).write_bytes(_read_own(first.folder, TOLERANCE_COPY, TOLERANCE_COPY, MAX_TOLERANCE))
    writer = ResultWriter(tmp, truncate=True)
    try:
        for s in shards:
            for row in s.rows:
                writer.append(_moved({**row, "run_id": run_id, "shard": s.text}, s.folder, tmp, dest))
    finally:
        writer.close()
    infos = [s.info for s in shards]
    started = min((i.get("started") for i in infos if i.get("started")), default=None)
    finished = max((i.get("finished") for i in infos if i.get("finished")), default=None)
    # (a shard's --baseline is not the merged run's: its report is not compared; qconform diff does that)
    options = {k: v for k, v in first.info["options"].items() if k not in ("shard", "baseline")}
    options.update(report_dir=str(dest), tolerance_copy=str(dest / TOLERANCE_COPY),
                   certify=any(i["options"].get("certify") for i in infos),
                   shards=first.info["options"]["shard"]["count"])
    planned = [i.get("planned") for i in infos]   # (a shard run under xdist has none: then nor has the merge)
    doc = {**{k: v for k, v in first.info.items() if k not in ("counts", "cost", "planned")}, "run_id": run_id,
           "planned": sum(planned) if all(type(n) is int for n in planned) else None,
           "started": started, "finished": finished, "options": options,
           "exit_status": _exit_status([i.get("exit_status") for i in infos]),
           "interrupted": False, "command": ["qconform", "merge", *map(str, dirs), "-o", str(dest)],
           "targets": _targets([(s.folder, s.info) for s in shards]),
           "shards": [{"shard": s.text, "run_id": s.info.get("run_id"), "dir": str(s.folder),
                       "host": s.info.get("host"), "git": s.info.get("git"), "complete": True,
                       "run_group": s.info["options"].get("run_group"),
                       "exit_status": s.info.get("exit_status"), "started": s.info.get("started"),
                       "finished": s.info.get("finished"), "groups": s.info["options"]["shard"].get("groups"),
                       "devices": {t: v.get("devices") for t, v in (s.info.get("targets") or {}).items()
                                   if v.get("devices")}}
                      for s in shards]}
    cases, waiver_files = _shard_certificates([(s.folder, s.cert) for s in shards])
    report = write_reports(tmp, certify=options["certify"], run_info=doc, certify_cases=cases,
                           certify_waiver_files=waiver_files)
    write_junit(tmp, doc, tmp / JUNIT)
    return report, doc


def _shard_certificates(shards) -> tuple[list, dict]:
    """From the shards' certificates ((folder, certificate or None)): their [case id, sha256] lists,
    together (a shard without one adds none: its cases then show as unlisted in the merged
    certificate, which does not verify), and the sha256 each recorded of its waiver files (the
    merge opens none of the files their run.json name; one the shards disagree on gets none)."""
    out: dict = {}
    files: dict = {}
    for _, cert in shards:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            if not isinstance(cert, dict):
                continue
            for i, h in (cert.get("case_set") or {}).get("list") or []:
                out[str(i)] = str(h)
            for f, h in ((cert.get("waivers") or {}).get("files") or {}).items():
                files[str(f)] = str(h) if isinstance(h, str) and files.get(str(f), h) == h else None
    return sorted([i, h] for i, h in out.items()), files


def _exit_status(codes: list) -> int:
    """1 if a shard failed, else 0 if one ran tests, else 5 (no tests anywhere)."""
    return 1 if 1 in codes else 0 if 0 in codes else 5


def _targets(shards) -> dict:
    """run.json's targets: the first shard's, with every shard's devices."""
    out = {t: dict(v) for t, v in (shards[0][1].get("targets") or {}).items()}
    for _, info in shards[1:]:
        for t, v in (info.get("targets") or {}).items():
            if v.get("devices"):
                out.setdefault(t, dict(v))["devices"] = {**(out[t].get("devices") or {}), **v["devices"]}
    return out


def _moved(row: dict, src: Path, tmp: Path, dest: Path) -> dict:
    """The row with its failure file copied into ``tmp`` (the merged folder being built, renamed
    ``dest`` at the end) and its paths (failure file, the repro's tolerance file) pointing to
    ``dest``. The shard wrote them under its folder as its command line named it (maybe
    relative): the part from ``failures/`` on is looked up in ``src``, never through a link."""
    ff = row.get("failure_file")
    parts = Path(ff).parts if isinstance(ff, str) else ()
    if "failures" in parts:
        at = len(parts) - 1 - parts[::-1].index("failures")
        rel = Path(*parts[at:])
        if ".." not in rel.parts and ((src / rel).exists() or (src / rel).is_symlink()):
            data = _read_own(src, rel, "failure_file", MAX_FAILURE_FILE)
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
            row["failure_file"] = str(dest / rel)
            if isinstance(row.get("repro"), str) and at:
                row["repro"] = row["repro"].replace(str(Path(*parts[:at])) + os.sep, str(dest) + os.sep)
    return row
