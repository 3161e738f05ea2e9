"""``qconform certify --verify``: a certificate checks against this checkout unchanged, and fails
after any one of its top-level fields is edited, with a wrong key, or with the suite's digests
changed; an unreadable one exits 2 (issue #23)."""

from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest

from reports.certify import FORMAT, read_certificate
from suite.cli import build_parser, main
from suite.core.errors import QconformError
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

# every command's imports (scipy, numpy.fft) now: pytester drops the modules a test imports when
# the test ends, and numpy's extension modules cannot be loaded twice in one process
build_parser()


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A certificate of a small run, signed with a key file of its own, and that key file."""
    return {}


@pytest.fixture
def cert(pytester, tmp_path, made):
    if not made:
        key = tmp_path / "key"
        key.write_bytes(os.urandom(32))
        run, rd = run_inprocess(pytester, "--target=tests.tie_kernels:Correct", "--ops", "ADD,FULLY_CONNECTED",
                                "--cases-per-op", "3", "--certify", f"--certify-key={key}")
        assert run.returncode == 0, run.stdout[-2000:]
        made.update(doc=json.loads((rd / "certificate.json").read_text()), key=key.read_bytes(),
                    md=(rd / "certificate.md").read_text())
    key = tmp_path / "k"
    key.write_bytes(made["key"])
    return copy.deepcopy(made["doc"]), key, made["md"]


def _verify(tmp_path, doc, key, *extra, name="c.json") -> int:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return main(["certify", "--verify", str(p), f"--key={key}", *extra])


def _edited(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v + 1
    if isinstance(v, str):
        return v + "x"
    if isinstance(v, dict):
        return {**v, "edited": 1}
    if isinstance(v, list):
        return [*v, "edited"]
    return "edited"


def test_a_certificate_holds_every_field_and_verifies(cert, tmp_path, capsys):
    doc, key, md = cert
    assert doc["format"] == FORMAT and doc["created_utc"].endswith("Z")
    assert doc["git"]["commit"] and doc["suite_version"] and doc["host"]["cpu_model"] is not None
    assert doc["golden"]["scheme"] == "tflite-ref-double"
    cs = doc["case_set"]
    assert len(cs["sha256"]) == 64 and all(len(d) == 64 for _, d in cs["list"]) and len(cs["list"]) == cs["cases"]
    tp = doc["tolerance_policy"]
    assert tp["default"] and len(tp["sha256"]) == 64 and "DEFAULT tolerance" in tp["note"]
    assert doc["spec_tables"] and all(len(d) == 64 for d in doc["spec_tables"].values())
    assert len(doc["findings"]["sha256"]) == 64 and "tie_scheme" in doc["rules"]
    o = {x["op"]: x for x in doc["ops"] if x["spec"] == "litert-int8"}["FULLY_CONNECTED"]
    assert o["best_scheme"] and o["bias"]["elements"] and o["clauses"] and o["verdict"] == "bit-exact"
    assert doc["signature"]["alg"] == "HMAC-SHA256" and len(doc["signature"]["value"]) == 64
    for words in ("(UTC)", "DEFAULT tolerance", "## Host", "## Spec clauses covered", "Signature"):
        assert words in md
    assert _verify(tmp_path, doc, key) == 0
    assert "VERIFIED" in capsys.readouterr().out


def test_any_edited_field_fails_verification(cert, tmp_path, capsys):
    doc, key, _ = cert
    for field in doc:
        bad = copy.deepcopy(doc)
        bad[field] = _edited(bad[field])
        # (an edited format tag is not a certificate of this format at all: unreadable)
        assert _verify(tmp_path, bad, key) == (2 if field == "format" else 1), field
    bad = copy.deepcopy(doc)
    bad["ops"][0]["verdict"] = "bit-exact" if bad["ops"][0]["verdict"] != "bit-exact" else "non-conformant"
    assert _verify(tmp_path, bad, key) == 1
    out = capsys.readouterr().out
    assert "MISMATCH  signature does not match" in out and "VERIFIED" not in out


def test_another_key_or_a_resigned_edit_fails(cert, tmp_path, capsys):
    from reports.certify import sign
    doc, key, _ = cert
    other = tmp_path / "other"
    other.write_bytes(os.urandom(32))
    assert _verify(tmp_path, doc, other) == 1
    # signed again after an edit, with the right key: the signature holds, the digests do not
    forged = copy.deepcopy(doc)
    forged["case_set"]["list"][0][1] = "0" * 64
    assert _verify(tmp_path, sign(forged, key), key) == 1
    assert "MISMATCH  case set" in capsys.readouterr().out
    forged = copy.deepcopy(doc)
    forged["tolerance_policy"]["sha256"] = "0" * 64
    assert _verify(tmp_path, sign(forged, key), key) == 1


def test_unreadable_certificates_exit_2(tmp_path, capsys):
    assert main(["certify", "--verify", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["certify", "--verify", str(tmp_path / "bad.json")]) == 2
    (tmp_path / "list.json").write_text("[1, 2]")
    assert main(["certify", "--verify", str(tmp_path / "list.json")]) == 2
    (tmp_path / "v1.json").write_text(json.dumps({"format": "qconform-certificate/1"}))
    assert main(["certify", "--verify", str(tmp_path / "v1.json")]) == 2
    os.mkfifo(tmp_path / "fifo")     # never blocks, never read
    assert main(["certify", "--verify", str(tmp_path / "fifo")]) == 2
    os.symlink("/dev/zero", tmp_path / "zero.json")
    assert main(["certify", "--verify", str(tmp_path / "zero.json")]) == 2
    with pytest.raises(QconformError, match="not a regular file"):
        read_certificate(tmp_path / "fifo")
    assert "unreadable" in capsys.readouterr().err


def test_the_user_key_signs_by_default(monkeypatch, tmp_path):
    from reports.certify import sign, signature_ok
    monkeypatch.setenv("QCONFORM_KEY_FILE", str(tmp_path / "key"))     # (keyed.py creates it, mode 0600)
    doc = sign({"format": FORMAT, "x": 1})
    assert "user's key" in doc["signature"]["key"] and signature_ok(doc)[0]
    doc["x"] = 2
    assert not signature_ok(doc)[0]


def test_a_merged_sharded_run_certifies_its_shards_cases(pytester, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("QCONFORM_KEY_FILE", str(tmp_path / "key"))
    w = tmp_path / "w.toml"
    w.write_text('format = "qconform-waivers/1"\ntarget = "correct"\n[[waiver]]\ncase = "NONE-*"\nreason = "r"\n'
                 'versions = { x = "1" }\nexpires = 2099-12-31\n')
    args = ("--target=tests.tie_kernels:Correct", "--ops", "ADD,MUL,RESHAPE", "--cases-per-op", "3", "--certify",
            f"--waivers={w}")
    shards = [run_inprocess(pytester, *args, f"--shard={k}/2", report_dir=tmp_path / f"s{k}")[1] for k in (1, 2)]
    out = tmp_path / "merged"
    w.rename(tmp_path / "w.kept")
    os.mkfifo(w)   # the merge opens no file a shard's run.json names (opened, a FIFO would hang it)
    assert main(["merge", *map(str, shards), "-o", str(out)]) == 0
    w.unlink()
    (tmp_path / "w.kept").rename(w)
    cert = json.loads((out / "certificate.json").read_text())
    # named by the shards' run.json, not read by the merge: the digest their certificates recorded
    assert cert["waivers"]["files"] == {str(w): hashlib.sha256(w.read_bytes()).hexdigest()}
    cs = cert["case_set"]
    assert cs["cases"] == len(cs["list"]) and not cs["unlisted"] and not cs["digest_mismatch"]
    assert main(["certify", "--verify", str(out / "certificate.json"), f"--waivers={w}"]) == 0, capsys.readouterr().out
