"""Waivers: known failures of one target, accepted for a runtime version until a date.

A waiver file (``qconform-waivers/1``, TOML; ``pytest --waivers FILE``, repeatable)::

    format = "qconform-waivers/1"
    target = "htp"                         # the target this file is for (glob)

    [[waiver]]
    case = "ADD-random-000"                # a case id, or a glob pattern: "CONV_2D-sat_*"
    reason = "HTP rounds the output rescale half up; QNN ticket 1234"
    versions = { onnxruntime-qnn = "2.7.*" }   # runtime version(s) it was accepted for
    expires = 2027-03-31                   # a TOML date: the waiver stops applying after it

A failing case (status ``fail``, ``error``, ``crash`` or ``timeout``) that matches a
valid waiver (case, target, every ``versions`` entry against the target's versions, not
expired) becomes ``waived``. An expired waiver is never applied: the case keeps
failing and its row says which waiver expired. A waived case that now passes is
flagged (``waiver_unneeded``). Both are reported loudly by the plugin, the HTML report
and the certificate, as are expired waivers that matched nothing.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path


from suite.core.errors import QconformError
from suite.core.userfile import load_toml
from suite.core.verdict import Status

FORMAT = "qconform-waivers/1"
MAX_PATTERN = 200   # characters of a glob pattern (fnmatch is quadratic in '[')
WAIVABLE = (Status.FAIL.value, Status.ERROR.value, Status.CRASH.value, Status.TIMEOUT.value)


@dataclass(frozen=True)
class Waiver:
    id: str                      # <file>#<index>
    case: str
    target: str
    reason: str
    versions: tuple[tuple[str, str], ...]
    expires: _dt.date

    def expired(self, today: _dt.date | None = None) -> bool:
        return (today or _dt.date.today()) > self.expires

    def matches(self, case_id: str, target: str) -> bool:
        return fnmatch.fnmatchcase(case_id, self.case) and fnmatch.fnmatchcase(target, self.target)

    def version_ok(self, versions: dict[str, str]) -> bool:
        return all(fnmatch.fnmatchcase(str(versions.get(k, "")), pat) for k, pat in self.versions)

    def as_dict(self) -> dict:
        return {"id": self.id, "case": self.case, "target": self.target, "reason": self.reason,
                "versions": dict(self.versions), "expires": self.expires.isoformat()}


@dataclass
class Waivers:
    items: list[Waiver] = field(default_factory=list)
    today: _dt.date = field(default_factory=_dt.date.today)

    def __bool__(self) -> bool:
        return bool(self.items)

    def expired(self) -> list[Waiver]:
        return [w for w in self.items if w.expired(self.today)]

    def lookup(self, case_id: str, target: str, versions: dict[str, str]):
        """(valid waiver or None, expired waiver or None, version-mismatched waiver or None)."""
        valid = expired = other = None
        for w in self.items:
            if not w.matches(case_id, target):
                continue
            if not w.version_ok(versions):
                other = other or w
            elif w.expired(self.today):
                expired = expired or w
            elif valid is None:
                valid = w
        return valid, expired, other

    def apply(self, v, versions: dict[str, str]) -> None:
        """Turn a waived failure of verdict ``v`` (suite.core.verdict.Verdict) into ``waived``;
        flag expired, version-mismatched and unneeded waivers in its row."""
        valid, expired, other = self.lookup(v.case_id, v.target, versions)
        row = v.row
        if v.status.value in WAIVABLE:
            if valid is not None:
                row["waived_status"] = v.status.value
                v.status = Status.WAIVED
                row["status"] = v.status.value
                v.waiver = row["waiver"] = valid.id
                v.reason = row["reason"] = f"waived by {valid.id} (until {valid.expires}): {valid.reason}; {v.reason}"
            elif expired is not None:
                row["waiver_expired"] = expired.id
                v.reason = row["reason"] = f"waiver {expired.id} EXPIRED on {expired.expires}; {v.reason}"
            elif other is not None:
                row["waiver_version_mismatch"] = other.id
                v.reason = row["reason"] = (f"waiver {other.id} is for {dict(other.versions)}, not this "
                                            f"runtime; {v.reason}")
        elif v.status is Status.PASS and (valid or expired or other) is not None:
            row["waiver_unneeded"] = (valid or expired or other).id


def _date(v, src: str, where: str) -> _dt.date:
    if isinstance(v, _dt.datetime):
        return v.date()
    if isinstance(v, _dt.date):
        return v
    if isinstance(v, str):
        try:
            return _dt.date.fromisoformat(v)
        except ValueError:
            pass
    raise QconformError(f"must be a date such as 2027-03-31 (got {v!r})", source=src, field=where,
                        rule="expiry date")


def load_waiver_file(path: str | Path) -> list[Waiver]:
    src = str(path)
    raw = load_toml(path, "waiver file", "--waivers", FORMAT)
    allowed_top = {"format", "target", "waiver"}
    extra = set(raw) - allowed_top
    if extra:
        raise QconformError(f"unknown key(s) {sorted(extra)} (allowed: {sorted(allowed_top)})", source=src,
                            rule="known keys")
    file_target = raw.get("target")
    if file_target is not None and (not isinstance(file_target, str) or not file_target):
        raise QconformError("must be a target name or glob", source=src, field="target")
    items = raw.get("waiver", [])
    if not isinstance(items, list):
        raise QconformError("must be a list of [[waiver]] tables", source=src, field="waiver")
    out = []
    allowed = {"case", "target", "reason", "versions", "expires"}
    for i, w in enumerate(items):
        where = f"waiver[{i}]"
        if not isinstance(w, dict):
            raise QconformError("must be a table", source=src, field=where)
        extra = set(w) - allowed
        if extra:
            raise QconformError(f"unknown key(s) {sorted(extra)} (allowed: {sorted(allowed)})", source=src,
                                field=where, rule="known keys")
        for key in ("case", "reason"):
            if not isinstance(w.get(key), str) or not w[key].strip():
                raise QconformError("is required (a non-empty string)", source=src, field=f"{where}.{key}",
                                    rule="a waiver names its case and its reason")
        patterns = [("case", w["case"]), ("target", w.get("target", file_target))]
        if isinstance(w.get("versions"), dict):
            patterns += [(f"versions.{k}", x) for k, x in w["versions"].items()]
        for key, pat in patterns:
            if isinstance(pat, str) and len(pat) > MAX_PATTERN:
                raise QconformError(f"is longer than {MAX_PATTERN} characters", source=src, field=f"{where}.{key}",
                                    rule="glob patterns")
        target = w.get("target", file_target)
        if not isinstance(target, str) or not target:
            raise QconformError("is required (here or at the top of the file)", source=src,
                                field=f"{where}.target", rule="a waiver is for one target")
        vers = w.get("versions")
        if (not isinstance(vers, dict) or not vers
                or not all(isinstance(k, str) and isinstance(x, str) for k, x in vers.items())):
            raise QconformError("is required: a table of component = \"version pattern\" "
                                "(as `qconform targets` lists them)", source=src, field=f"{where}.versions",
                                rule="a waiver is tied to a runtime version")
        if "expires" not in w:
            raise QconformError("is required", source=src, field=f"{where}.expires", rule="waivers expire")
        out.append(Waiver(id=f"{Path(src).name}#{i}", case=w["case"], target=target, reason=w["reason"].strip(),
                          versions=tuple(sorted(vers.items())), expires=_date(w["expires"], src, f"{where}.expires")))
    return out


def load_waivers(paths: list[str] | None, today: _dt.date | None = None) -> Waivers:
    items: list[Waiver] = []
    for p in paths or []:
        items.extend(load_waiver_file(p))
    return Waivers(items, today or _dt.date.today())
