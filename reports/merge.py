"""``qconform merge RUN... -o DIR``: one run folder of the N shards of a run (``pytest --shard=K/N``
on N hosts, suite/harness/shard.py).

The shards must be the N shares of one run: each names its share in run.json (options.shard),
every share 1..N once, the same case set (seed, ops, cases per op, case files, model, targets and
their split), the same tolerance policy (its SHA-256), scheme and target versions. Anything else
is refused with one error naming the shard's run.json and the field; nothing is written then.

DIR gets every shard's rows (run id: the merged run's; ``shard``: K/N), the failure files they
name and the tolerance policy (repro lines rewritten to point there), then summary, index.html,
results.parquet, the certificate (when the shards certified) and run.json, whose ``shards`` lists
each shard's run, host, devices and whether it was complete. The merged run passes only if every
shard was complete: an interrupted or unfinished shard makes it ``interrupted``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from reports.build import Report, write_reports
from reports.certify import read_certificate
from reports.results import RESULTS, ResultWriter, scan
from reports.runinfo import RUN_JSON, TOLERANCE_COPY, load_run_json
from suite.core.errors import QconformError
from suite.core.userfile import read_bytes

MAX_FAILURE_FILE = 64 << 20   # bytes of a failure file copied over
#: run.json options that make the case set and its judging: equal in every shard
SAME = ("seed", "ops", "cases_per_op", "case_files", "model", "scheme", "tolerance_digest")


def read_shard(d: str | Path) -> tuple[Path, dict]:
    """(the run folder, its run.json) of a shard given as a run folder or a report folder (its latest)."""
    p = Path(d)
    if p.is_dir() and not (p / RUN_JSON).exists() and (p / "latest").is_dir():
        p = p / "latest"
    folder = p.resolve()
    if not folder.is_dir():
        raise QconformError("no such run folder", source=str(d), field="RUN")
    info = load_run_json(folder, "RUN")
    sh = info["options"].get("shard")
    if not isinstance(sh, dict) or not isinstance(sh.get("index"), int) or not isinstance(sh.get("count"), int):
        raise QconformError("is not a shard (no options.shard)", source=str(folder / RUN_JSON), field="options.shard",
                            rule="qconform merge takes the run folders of `pytest --shard=K/N`")
    return folder, info


def _complete(info: dict) -> bool:
    """A shard that ran to its end: finished, not interrupted, an exit status of a run (0 or 1;
    5: a shard with no tests), not filtered."""
    return (info.get("finished") is not None and not info.get("interrupted") and info.get("exit_status") in (0, 1, 5)
            and not (info.get("options") or {}).get("filtered"))


def check_shards(shards: list[tuple[Path, dict]]) -> None:
    """QconformError unless ``shards`` are the N shares of one run, each once."""
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
        for k in SAME:
            if o.get(k) != o0.get(k):
                raise QconformError(f"{k} {o.get(k)!r} differs from {d0}'s {o0.get(k)!r}", source=src,
                                    field=f"options.{k}", rule="the shards of one run have one case set and policy")
        if sorted(o.get("targets") or []) != sorted(o0.get("targets") or []):
            raise QconformError(f"targets {o.get('targets')} differ from {d0}'s {o0.get('targets')}", source=src,
                                field="options.targets", rule="the shards of one run test the same targets")
        if sh.get("set_sha256") != o0["shard"].get("set_sha256"):
            raise QconformError(f"its (op, target) groups differ from {d0}'s (split sha256 "
                                f"{str(sh.get('set_sha256'))[:12]}... vs {str(o0['shard'].get('set_sha256'))[:12]}...)",
                                source=src, field="options.shard.set_sha256", rule="the shards of one run have one case set")
        for t, v in (info.get("targets") or {}).items():
            want = ((i0.get("targets") or {}).get(t) or {}).get("versions")
            if want is not None and v.get("versions") != want:
                raise QconformError(f"target {t} has versions {v.get('versions')}, {d0} has {want}", source=src,
                                    field=f"targets.{t}.versions", rule="one target, one set of versions in a merged run")
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in seen]
    if missing:
        raise QconformError(f"shard(s) {', '.join(missing)} missing (given: "
                            f"{', '.join(f'{k}/{n}' for k in sorted(seen))})", field="RUN",
                            rule="a merged run has every shard")


def merge(dirs: list[str | Path], out: str | Path, run_id: str) -> tuple[Report, dict]:
    """Merge the shards ``dirs`` into the new run folder ``out`` (run id ``run_id``): (its report,
    its run.json document). QconformError before anything is written if they are not one run."""
    shards = sorted((read_shard(d) for d in dirs), key=lambda s: s[1]["options"]["shard"]["index"])
    check_shards(shards)
    dest = Path(out)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise QconformError("exists and is not an empty folder", source=str(dest), field="-o",
                            rule="the merged run gets a folder of its own")
    dest.mkdir(parents=True, exist_ok=True)
    first_dir, first = shards[0]
    if (first_dir / TOLERANCE_COPY).is_file():
        (dest / TOLERANCE_COPY).write_bytes(read_bytes(first_dir / TOLERANCE_COPY, TOLERANCE_COPY, "RUN", "toml"))
    writer = ResultWriter(dest, truncate=True)
    try:
        for d, info in shards:
            text = info["options"]["shard"]["text"]
            for _, row in scan(d / RESULTS):
                if row.get("run_id") != info.get("run_id"):
                    continue   # (rows of another run in the file: not this shard's)
                writer.append(_moved({**row, "run_id": run_id, "shard": text}, d, dest))
    finally:
        writer.close()
    complete = all(_complete(info) for _, info in shards)
    started = min((i.get("started") for _, i in shards if i.get("started")), default=None)
    finished = max((i.get("finished") for _, i in shards if i.get("finished")), default=None)
    # (a shard's --baseline is not the merged run's: its report is not compared; qconform diff does that)
    options = {k: v for k, v in first["options"].items() if k not in ("shard", "baseline")}
    options.update(report_dir=str(dest), tolerance_copy=str(dest / TOLERANCE_COPY),
                   certify=any(i["options"].get("certify") for _, i in shards),
                   shards=first["options"]["shard"]["count"])
    planned = [i.get("planned") for _, i in shards]   # (a shard run under xdist has none: then nor has the merge)
    doc = {**{k: v for k, v in first.items() if k not in ("counts", "cost", "planned")}, "run_id": run_id,
           "planned": sum(planned) if all(type(n) is int for n in planned) else None,
           "started": started, "finished": finished if complete else None, "options": options,
           "exit_status": _exit_status([i.get("exit_status") for _, i in shards]) if complete else None,
           "interrupted": not complete, "command": ["qconform", "merge", *map(str, dirs), "-o", str(dest)],
           "targets": _targets(shards),
           "shards": [{"shard": i["options"]["shard"]["text"], "run_id": i.get("run_id"), "dir": str(d),
                       "host": i.get("host"), "git": i.get("git"), "complete": _complete(i),
                       "exit_status": i.get("exit_status"), "started": i.get("started"), "finished": i.get("finished"),
                       "groups": i["options"]["shard"].get("groups"),
                       "devices": {t: v.get("devices") for t, v in (i.get("targets") or {}).items() if v.get("devices")}}
                      for d, i in shards]}
    cases, waiver_files = _shard_certificates(shards)
    report = write_reports(dest, certify=options["certify"], run_info=doc, certify_cases=cases,
                           certify_waiver_files=waiver_files)
    return report, doc


def _shard_certificates(shards) -> tuple[list, dict]:
    """From the shards' certificates: their [case id, sha256] lists, together (a shard without one
    adds none: its cases then show as unlisted in the merged certificate, which does not verify),
    and the sha256 each recorded of its waiver files (the merge opens none of the files their
    run.json name; one the shards disagree on gets none)."""
    out: dict = {}
    files: dict = {}
    for d, _ in shards:
        with contextlib.suppress(OSError, ValueError, QconformError, AttributeError, TypeError):
            cert = read_certificate(d)
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


def _moved(row: dict, src: Path, dest: Path) -> dict:
    """The row with its failure file copied into ``dest`` and its paths (failure file, the repro's
    tolerance file) pointing there. The shard wrote them under its folder as its command line named
    it (maybe relative): the part from ``failures/`` on is looked up in ``src``."""
    ff = row.get("failure_file")
    parts = Path(ff).parts if isinstance(ff, str) else ()
    if "failures" in parts:
        at = len(parts) - 1 - parts[::-1].index("failures")
        rel = Path(*parts[at:])
        if ".." not in rel.parts and (src / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(read_bytes(src / rel, rel.name, "failure_file", limit=MAX_FAILURE_FILE))
            row["failure_file"] = str(dest / rel)
            if isinstance(row.get("repro"), str) and at:
                row["repro"] = row["repro"].replace(str(Path(*parts[:at])) + os.sep, str(dest) + os.sep)
    return row
