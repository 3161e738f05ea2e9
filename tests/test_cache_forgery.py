"""Caches that cannot lie (issue #13), end to end: entries forged in the golden store (the
store's own format holding the values a broken kernel returns, under a checksum anyone can
compute or a MAC under another user's key) and pickle payloads dropped into the cache folder
change no verdict and execute nothing."""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

from suite.cases.generate import generate
from suite.harness import goldens
from suite.harness.goldens import GoldenStore
from tests.conftest import ROOT, rows_written, run_folder
from tests.helper_targets import WrongTarget

OPS = ["ADD", "SUM", "CONV_2D"]
SCHEME = "tflite-ref-double"


class Payload:
    """Unpickling this creates the marker file: proof that something unpickled it."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _run(tmp_path: Path, cache: Path, name: str):
    report = tmp_path / name
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--report-dir={report}",
           "--target=tests.helper_targets:WrongTarget,ref", "--ops", ",".join(OPS), "--cases-per-op", "4",
           f"--golden-cache={cache}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    rows = rows_written(run_folder(report))
    return proc, {(r["case_id"], r["target"]): (r["status"], r.get("max_abs_lsb")) for r in rows}


def test_forged_and_pickled_cache_entries_change_no_verdict_and_run_nothing(tmp_path):
    cache = tmp_path / "golden"
    first, before = _run(tmp_path, cache, "first")
    assert first.returncode == 1, first.stdout + first.stderr   # WrongTarget fails every third case
    assert {s for s, _ in before.values()} >= {"pass", "fail"}

    store = GoldenStore(cache, key=Path(os.environ["QCONFORM_KEY_FILE"]).read_bytes())
    other = GoldenStore(cache, key=b"another user's key, not ours!!!")
    marker = tmp_path / "pwned"
    cases = [c for c in generate(OPS, 4, 0)]
    assert all(store.get(c.digest()) for c in cases)   # the first run stored every case's goldens
    for k, c in enumerate(cases):
        # what a broken kernel returns, as the golden: trusted, it would make WrongTarget pass
        wrong = {SCHEME: WrongTarget().outputs(c)}
        path = store.path_of(c.digest())
        if k % 3 == 0:    # signed with another key
            other.put(c.digest(), wrong)
        elif k % 3 == 1:  # the store's format with a checksum anyone can recompute
            arrays = goldens._flatten(wrong)
            plain = hashlib.sha256(b"".join(bytes(p) if not isinstance(p, str) else p.encode()
                                            for p in goldens.mac_parts(store.version, c.digest(), arrays)))
            path.write_bytes(goldens._encode(arrays, plain.hexdigest()))
        else:             # a pickle payload under the entry's own name
            path.write_bytes(pickle.dumps(Payload(str(marker))))
    for name in ("evil.pkl", "evil.npz", "cases-0.pkl", f"{store.version}.pkl"):
        (cache / name).write_bytes(pickle.dumps(Payload(str(marker))))
        (cache / store.version / name).write_bytes(pickle.dumps(Payload(str(marker))))

    second, after = _run(tmp_path, cache, "second")
    assert after == before, {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
                             if before.get(k) != after.get(k)}
    assert second.returncode == 1
    assert not marker.exists(), "a pickle payload in the cache folder was executed"
    assert "golden cache:" in second.stdout   # the forged and damaged entries are reported, not used
