"""``qconform certify --verify``: a certificate checks against this checkout unchanged, and fails
after any one of its top-level fields is edited, with a wrong key, or with the suite's digests
changed; an unreadable one exits 2 (issue #23)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os

import pytest

from reports import attest
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
    """A certificate of a small run, signed with a key pair of its own, and that key pair."""
    return {}


@pytest.fixture
def cert(pytester, tmp_path, made):
    if not made:
        key = tmp_path / "key.pem"
        attest.keygen(key)
        run, rd = run_inprocess(pytester, "--target=tests.tie_kernels:Correct", "--ops", "ADD,FULLY_CONNECTED",
                                "--cases-per-op", "3", "--certify", f"--certify-key={key}")
        assert run.returncode == 0, run.stdout[-2000:]
        made.update(env=json.loads((rd / "certificate.json").read_text()), key=key.read_bytes(),
                    pub=attest.public_path(key).read_bytes(), md=(rd / "certificate.md").read_text())
    key = tmp_path / "k.pem"
    key.write_bytes(made["key"])
    key.chmod(0o600)
    attest.public_path(key).write_bytes(made["pub"])
    return copy.deepcopy(made["env"]), key, made["md"]


def _doc(env: dict) -> dict:
    return json.loads(base64.b64decode(env["payload"]))["predicate"]


def _with(env: dict, doc: dict) -> dict:
    """``env`` with its payload's predicate replaced, the signature left as it was."""
    st = json.loads(base64.b64decode(env["payload"]))
    st["predicate"] = doc
    return {**env, "payload": base64.b64encode(json.dumps(st).encode()).decode()}


def _verify(tmp_path, env, key, *extra, name="c.json") -> int:
    p = tmp_path / name
    p.write_text(json.dumps(env))
    return main(["certify", "--verify", str(p), f"--public-key={attest.public_path(key)}", *extra])


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
    env, key, md = cert
    doc = _doc(env)
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
    assert doc["signer"]["alg"] == "ed25519" and doc["signer"]["keyid"] == env["signatures"][0]["keyid"]
    for words in ("(UTC)", "DEFAULT tolerance", "## Host", "## Spec clauses covered", "Signed"):
        assert words in md
    assert _verify(tmp_path, env, key) == 0
    assert "VERIFIED" in capsys.readouterr().out


def test_any_edited_field_fails_verification(cert, tmp_path, capsys):
    env, key, _ = cert
    doc = _doc(env)
    for field in doc:
        bad = copy.deepcopy(doc)
        bad[field] = _edited(bad[field])
        assert _verify(tmp_path, _with(env, bad), key) == 1, field   # (the signature first, whatever the field)
    bad = copy.deepcopy(doc)
    bad["ops"][0]["verdict"] = "bit-exact" if bad["ops"][0]["verdict"] != "bit-exact" else "non-conformant"
    assert _verify(tmp_path, _with(env, bad), key) == 1
    out = capsys.readouterr().out
    assert "FORGED" in out and "VERIFIED against" not in out


def test_another_key_or_a_resigned_edit_fails(cert, tmp_path, capsys):
    from reports.certify import seal
    env, key, _ = cert
    other = tmp_path / "other.pem"
    attest.keygen(other)
    assert _verify(tmp_path, env, other) == 1
    assert "OTHER KEY" in capsys.readouterr().out
    signer = attest.load_signer(key)
    # signed again after an edit, with the right key: the signature holds, the digests do not
    forged = _doc(env)
    forged["case_set"]["list"][0][1] = "0" * 64
    assert _verify(tmp_path, seal(forged, signer), key) == 1
    assert "MISMATCH  case set" in capsys.readouterr().out
    forged = _doc(env)
    forged["tolerance_policy"]["sha256"] = "0" * 64
    assert _verify(tmp_path, seal(forged, signer), key) == 1


def test_unreadable_certificates_exit_2(tmp_path, capsys):
    assert main(["certify", "--verify", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["certify", "--verify", str(tmp_path / "bad.json")]) == 2
    (tmp_path / "list.json").write_text("[1, 2]")
    assert main(["certify", "--verify", str(tmp_path / "list.json")]) == 2
    (tmp_path / "v1.json").write_text(json.dumps({"format": "qconform-certificate/2", "signature": {}}))
    assert main(["certify", "--verify", str(tmp_path / "v1.json")]) == 2
    os.mkfifo(tmp_path / "fifo")     # never blocks, never read
    assert main(["certify", "--verify", str(tmp_path / "fifo")]) == 2
    os.symlink("/dev/zero", tmp_path / "zero.json")
    assert main(["certify", "--verify", str(tmp_path / "zero.json")]) == 2
    with pytest.raises(QconformError, match="not a regular file"):
        read_certificate(tmp_path / "fifo")
    assert "unreadable" in capsys.readouterr().err


def test_the_user_key_signs_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("QCONFORM_CERTIFY_KEY", str(tmp_path / "mine.pem"))   # (made on first use, mode 0600)
    signer = attest.signing_key(None)
    assert signer.created and (tmp_path / "mine.pem").stat().st_mode & 0o077 == 0
    assert attest.signing_key(None).keyid == signer.keyid and not attest.signing_key(None).created
    env = attest.Envelope(attest.seal({"format": FORMAT, "x": 1}, [], signer))
    pub = attest.load_public(tmp_path / "mine.pem.pub")
    assert env.check(pub)[0] == "valid"


def test_a_merged_sharded_run_certifies_its_shards_cases(pytester, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("QCONFORM_CERTIFY_KEY", str(tmp_path / "key.pem"))
    w = tmp_path / "w.toml"
    w.write_text('format = "qconform-waivers/1"\ntarget = "correct"\n[[waiver]]\ncase = "NONE-*"\nreason = "r"\n'
                 'versions = { x = "1" }\nexpires = 2099-12-31\n')
    args = ("--target=tests.tie_kernels:Correct", "--ops", "ADD,MUL,RESHAPE", "--cases-per-op", "3", "--certify",
            f"--waivers={w}")
    shards = [run_inprocess(pytester, *args, f"--shard={k}/2", report_dir=tmp_path / f"s{k}")[1] for k in (1, 2)]
    out = tmp_path / "merged"
    w.rename(tmp_path / "w.kept")
    os.mkfifo(w)   # the merge opens no file a shard's run.json names (opened, a FIFO would hang it)
    assert main(["merge", "--allow-dirty", *map(str, shards), "-o", str(out)]) == 0
    w.unlink()
    (tmp_path / "w.kept").rename(w)
    cert = read_certificate(out)
    # named by the shards' run.json, not read by the merge: the digest their certificates recorded
    assert cert["waivers"]["files"] == {str(w): hashlib.sha256(w.read_bytes()).hexdigest()}
    cs = cert["case_set"]
    assert cs["cases"] == len(cs["list"]) and not cs["unlisted"] and not cs["digest_mismatch"]
    assert main(["certify", "--verify", str(out / "certificate.json"), f"--waivers={w}"]) == 0, capsys.readouterr().out
    # (the user's own public key, by default: what `pytest --certify` signed with)


def test_a_certificate_that_certifies_nothing_fails_the_run_and_its_verification(pytester, tmp_path, capsys):
    """Every (op, target) unsupported: nothing is certified, so neither the run nor --verify passes."""
    key = tmp_path / "key.pem"
    attest.keygen(key)
    run, rd = run_inprocess(pytester, "--target=tests.tie_kernels:VendorFC", "--ops", "ADD,MUL",
                            "--cases-per-op", "2", "--certify", f"--certify-key={key}")
    assert run.returncode == 1, run.stdout[-2000:]
    doc = _doc(json.loads((rd / "certificate.json").read_text()))
    assert {o["verdict"] for o in doc["ops"]} == {"unsupported"}
    assert main(["certify", "--verify", str(rd / "certificate.json"), f"--public-key={attest.public_path(key)}"]) == 1
    out = capsys.readouterr().out
    assert "no (op, target) is certified conformant" in out and "NON-CONFORMANT" in out


def test_a_verification_that_compared_no_kernel_file_says_so(cert, tmp_path, capsys):
    env, key, _ = cert
    doc = _doc(env)
    if not any((t.get("kernel") or {}).get("sources") for t in doc["targets"].values()):
        pytest.fail("the certified kernel names its source files")
    assert _verify(tmp_path, env, key) == 0
    assert "the kernel files NOT compared (give --kernel-source)" in capsys.readouterr().out
