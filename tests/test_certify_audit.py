"""A certificate an auditor verifies alone (issue #30, and #33's probe items 9 and 10).

A user FULLY_CONNECTED kernel in four builds (tests/tie_kernels.py: half away from zero, half up,
ties toward zero, truncating), each certified with a key pair of ``qconform keygen``: the correct
one verifies with only the public key in a HOME that never saw the private key, and a standard
DSSE / in-toto verifier (securesystemslib's, in-toto-attestation's own code) accepts it; every
wrong build fails its run and ``certify --verify`` with its rounding in words; an edited field, a
swapped public key and a kernel source changed after signing are each refused with their own
message; a key that cannot be read is an error before the run."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

import pytest

from suite.cli import build_parser, main
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"
build_parser()   # (every command's imports now: see tests/test_certify_verify.py)

KERNEL = "from tests.tie_kernels import VendorFC{rounding}\n\n\nclass Kernel(VendorFC{rounding}):\n    name = 'my-fc'\n"
WORDS = {"HalfUp": "rounds ties up (toward +infinity): 190 of 190 mismatching elements are rounding ties",
         "TowardZero": "rounds ties toward zero: 379 of 379 mismatching elements are rounding ties",
         "Truncate": "truncates toward zero"}
SPEC_WORDS = "the spec rounds half away from zero"


@pytest.fixture(scope="module")
def runs():
    """Each build's run: {build: (returncode, stdout, run folder, kernel file)} (made once)."""
    return {}


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("signer")
    assert main(["keygen", "-o", str(d / "k.pem")]) == 0
    assert main(["keygen", "-o", str(d / "other.pem")]) == 0
    return d / "k.pem", d / "k.pem.pub", d / "other.pem.pub"


def _certified(pytester, runs, keys, build: str):
    if build not in runs:
        kdir = pytester.path / f"kernel_{build.lower()}"
        kdir.mkdir()
        src = kdir / f"fc_{build.lower()}.py"
        src.write_text(KERNEL.format(rounding="" if build == "Correct" else build))
        pytester.syspathinsert(kdir)
        run, rd = run_inprocess(pytester, f"--target=fc_{build.lower()}:Kernel", "--ops", "FULLY_CONNECTED",
                                "--certify", f"--certify-key={keys[0]}")
        keep = pytester.path.parent / f"kept-{build}"
        shutil.copytree(rd, keep)
        shutil.copy(src, keep / src.name)
        runs[build] = (run.returncode, run.stdout, keep, keep / src.name)
    return runs[build]


@pytest.fixture
def auditor(tmp_path, monkeypatch):
    """A HOME that never saw the private key (nor any qconform key)."""
    home = tmp_path / "auditor-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("QCONFORM_CERTIFY_KEY", raising=False)
    return home


def _files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_the_correct_kernel_verifies_with_only_the_public_key(pytester, runs, keys, auditor, capsys):
    code, out, rd, src = _certified(pytester, runs, keys, "Correct")
    assert code == 0, out[-3000:]
    pub = auditor / "vendor.pub"
    shutil.copy(keys[1], pub)
    capsys.readouterr()
    assert main(["certify", "--verify", str(rd), "--public-key", str(pub), "--kernel-source", str(src)]) == 0
    text = capsys.readouterr().out
    assert "signature valid: Ed25519" in text and "VERIFIED" in text, text
    assert "verdict: FULLY_CONNECTED (litert-int8) on my-fc: bit-exact" in text
    assert f"kernel file {src}: sha256 equal" in text
    assert _files(auditor) == ["vendor.pub"]   # nothing created, no private key anywhere
    # what was certified, under the signature: module:Class, its source's sha256, per-case output digests
    env = json.loads((rd / "certificate.json").read_text())
    st = json.loads(base64.b64decode(env["payload"]))
    cert = st["predicate"]
    kernel = cert["targets"]["my-fc"]["kernel"]
    assert kernel["class"] == "fc_correct:Kernel" and kernel["sources"][0]["path"].endswith("fc_correct.py")
    import hashlib
    assert {s["digest"]["sha256"] for s in st["subject"]} >= {hashlib.sha256(src.read_bytes()).hexdigest()}
    op = next(o for o in cert["ops"] if o["spec"] == "litert-int8")
    assert len(op["outputs"]) == op["counts"]["cases"] and all(len(d) == 16 or len(d) >= 16 for _, d in op["outputs"])
    # an int8-only kernel does not claim QNN's uint8/uint16 encodings: not listed as unsupported
    assert [o["spec"] for o in cert["ops"]] == ["litert-int8"]
    assert [n["spec"] for n in cert["not_claimed"]] == ["qnn"]
    md = (rd / "certificate.md").read_text()
    assert not [ln for ln in md.splitlines() if "None" in ln]
    assert "| unsupported |" not in md.split("## Verdicts")[1].split("\n", 4)[4]   # (past the header)


def test_a_standard_dsse_and_in_toto_verifier_accepts_it(pytester, runs, keys):
    dsse = pytest.importorskip("securesystemslib.dsse")
    from cryptography.hazmat.primitives import serialization
    from in_toto_attestation.v1.statement import Statement
    from securesystemslib.signer import SSlibKey
    from google.protobuf import json_format
    _, _, rd, _ = _certified(pytester, runs, keys, "Correct")
    env = dsse.Envelope.from_dict(json.loads((rd / "certificate.json").read_text()))
    pub = SSlibKey.from_crypto(serialization.load_pem_public_key(keys[1].read_bytes()))
    assert set(env.verify([pub], 1)) == {pub.keyid}   # securesystemslib's own PAE and Ed25519 check
    other = SSlibKey.from_crypto(serialization.load_pem_public_key(keys[2].read_bytes()))
    with pytest.raises(Exception):
        env.verify([other], 1)
    st = json.loads(env.pae().split(b" ", 4)[4])   # (the payload, as the verifier saw it)
    from in_toto_attestation.v1 import statement_pb2
    proto = json_format.ParseDict(st, statement_pb2.Statement())   # (its JSON names: _type, predicateType)
    Statement.copy_from_pb(proto).validate()   # in-toto-attestation's own Statement rules
    assert proto.predicate["format"] == "qconform-certificate/3"


@pytest.mark.parametrize("build", ["HalfUp", "TowardZero", "Truncate"])
def test_every_wrong_build_fails_its_run_and_its_verification_in_words(pytester, runs, keys, build, capsys):
    code, out, rd, _ = _certified(pytester, runs, keys, build)
    assert code == 1, out[-3000:]
    last = [ln for ln in out.splitlines() if ln.startswith("qconform: ")][-1]
    assert "certificate NON-CONFORMANT" in last and WORDS[build] in last and SPEC_WORDS in last, last
    for page in ("summary.md", "index.html"):
        text = (rd / page).read_text()
        assert "FAIL" in text and "NON-CONFORMANT" in text and WORDS[build] in text, page
    assert json.loads((rd / "run.json").read_text())["exit_status"] == 1
    capsys.readouterr()
    assert main(["certify", "--verify", str(rd), "--public-key", str(keys[1])]) == 1
    text = capsys.readouterr().out
    assert "signature valid" in text and "NON-CONFORMANT" in text
    verdict = next(ln for ln in text.splitlines() if "verdict: FULLY_CONNECTED" in ln)
    assert verdict.startswith("FAIL") and WORDS[build] in verdict, verdict
    # the words first, the closest scheme second
    assert verdict.index(WORDS[build]) < verdict.index("scheme")
    assert main(["certify", "--verify", str(rd), "--public-key", str(keys[1]), "--signature-only"]) == 0
    assert "AUTHENTIC" in capsys.readouterr().out


def _payload_edit(env: dict, edit) -> dict:
    st = json.loads(base64.b64decode(env["payload"]))
    edit(st["predicate"])
    return {**env, "payload": base64.b64encode(json.dumps(st).encode()).decode()}


def test_edits_keys_and_sources_are_each_refused_with_their_own_message(pytester, runs, keys, auditor, tmp_path,
                                                                       capsys, monkeypatch):
    _, _, rd, src = _certified(pytester, runs, keys, "Correct")
    env = json.loads((rd / "certificate.json").read_text())
    pub, other = str(keys[1]), str(keys[2])

    def verify(doc, *extra, raw=None) -> tuple[int, str]:
        p = tmp_path / "c.json"
        p.write_text(raw if raw is not None else json.dumps(doc))
        capsys.readouterr()
        code = main(["certify", "--verify", str(p), *extra])
        out = capsys.readouterr()
        return code, out.out + out.err

    # an edited field: the signature does not verify (and nothing else is done: no case regenerated)
    import suite.commands.certify as cmd
    with monkeypatch.context() as m:
        m.setattr(cmd, "generate", lambda *a, **k: pytest.fail("cases regenerated after a bad signature"))
        for edit in (lambda c: c["ops"][0].update(verdict="bit-exact", reason="edited"),
                     lambda c: c["case_set"].update(cases_per_op=10_000_000)):
            code, text = verify(_payload_edit(env, edit), "--public-key", pub)
            assert code == 1 and "FORGED" in text and "edited after it was signed" in text, text
    # another signer's public key: its own message, never "forged"
    code, text = verify(env, "--public-key", other)
    assert code == 1 and "OTHER KEY" in text and "not the key that signed" in text and "forged" not in text.lower()
    # no public key at all (a fresh HOME): its own message, and no file made
    code, text = verify(env)
    assert code == 1 and "NO KEY" in text and "--public-key" in text and "forged" not in text.lower()
    assert _files(auditor) == []
    # a private key given as the public one is refused, not used
    code, text = verify(env, "--public-key", str(keys[0]))
    assert code == 1 and "private key" in text
    # the kernel's source changed after signing
    src.write_text(src.read_text() + "\n# a change after signing\n")
    code, text = verify(env, "--public-key", pub, "--kernel-source", str(src))
    assert code == 1 and "CHANGED since it was certified" in text, text
    # a key twice in one object (a forged "ops" before the real one), in the envelope or its payload
    raw = json.dumps(env)
    code, text = verify(None, "--public-key", pub, raw='{"payload": "e30=", ' + raw[1:])
    assert code == 2 and "duplicate key 'payload'" in text, text
    st_text = base64.b64decode(env["payload"]).decode()
    forged = st_text.replace('"predicate":{', '"predicate":{"ops":[],', 1)
    code, text = verify({**env, "payload": base64.b64encode(forged.encode()).decode()}, "--public-key", pub)
    assert code == 1 and "FORGED" in text   # (signature first: the bytes changed)


def test_an_edited_certificate_md_is_caught(pytester, runs, keys, tmp_path, capsys):
    _, _, rd, _ = _certified(pytester, runs, keys, "TowardZero")
    d = tmp_path / "run"
    shutil.copytree(rd, d)
    md = (d / "certificate.md").read_text()
    (d / "certificate.md").write_text(md.replace("**non-conformant**", "**bit-exact**").replace("NON-CONFORMANT", ""))
    capsys.readouterr()
    assert main(["certify", "--verify", str(d), "--public-key", str(keys[1])]) == 1
    assert "certificate.md is NOT the rendering of the signed certificate.json" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "missing", "not-a-key"])
def test_a_key_that_cannot_be_read_is_an_error_before_the_run(pytester, tmp_path, kind):
    key = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "fifo", "missing": tmp_path / "none.pem",
           "not-a-key": tmp_path / "junk.pem"}[kind]
    if kind == "fifo":
        os.mkfifo(key)
    if kind == "not-a-key":
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
    run, _ = run_inprocess(pytester, "--target=tests.tie_kernels:VendorFC", "--ops", "FULLY_CONNECTED",
                           "--cases-per-op", "2", "--certify", f"--certify-key={key}")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout[-2000:]
    assert str(key) in run.stderr and "--certify-key" in run.stderr, run.stderr
    assert not list(pytester.path.rglob("certificate.json"))


def test_certify_alone_says_how_a_certificate_is_made(capsys):
    assert main(["certify"]) == 2
    err = capsys.readouterr().err
    assert "pytest --target=X --certify" in err and "--public-key" in err


def test_a_kernel_s_shared_library_named_by_the_environment_is_certified(tmp_path, monkeypatch):
    import numpy
    from suite.harness.identity import identity
    from tests.tie_kernels import VendorFC
    lib = tmp_path / "libqcfc.so"
    shutil.copy(next(Path(numpy.__file__).parent.rglob("*.so")), lib)   # (any ELF shared object)
    monkeypatch.setenv("QC_FC_LIB", str(lib))
    monkeypatch.setenv("QC_NOT_A_LIB", str(tmp_path))
    got = identity(VendorFC(), "tests.tie_kernels:VendorFC")
    import hashlib
    assert got["class"] == "tests.tie_kernels:VendorFC"
    assert got["libraries"] == [{"path": str(lib), "sha256": hashlib.sha256(lib.read_bytes()).hexdigest(),
                                 "env": "QC_FC_LIB"}]
