"""A certificate's signature: an in-toto Statement (predicate: the qconform certificate) in a DSSE
envelope, signed with Ed25519 (``cryptography``).

certificate.json is the envelope itself, the format supply-chain tools verify::

    {"payloadType": "application/vnd.in-toto+json",
     "payload": base64(Statement JSON),
     "signatures": [{"keyid": KEYID, "sig": base64(Ed25519 over PAE(payloadType, payload))}]}

PAE is DSSE's pre-authentication encoding. KEYID is the public key's fingerprint as
securesystemslib computes it (sha256 of the canonical JSON of its ``keytype``, ``scheme`` and
``keyval``), so ``securesystemslib.dsse.Envelope.verify`` and in-toto's tools take our public key
as it is (tests/test_attest.py checks it with their own code). The Statement's subjects are what
was certified, by digest: the kernel's source files and shared libraries, and the case set.

Keys: ``qconform keygen`` writes a PKCS#8 PEM private key (mode 0600) and its public key beside it
(``<file>.pub``, SubjectPublicKeyInfo PEM). ``pytest --certify`` signs with ``--certify-key FILE``,
else with the user's key (``$QCONFORM_CERTIFY_KEY``, else ``~/.config/qconform/certify-ed25519.pem``;
made on first use, as ``keygen`` would). The auditor needs only the public key: verifying opens no
private key, and creates no file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from suite.core import keyed
from suite.core.errors import QconformError

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://qconform.dev/attestation/certificate/v3"
KEY_ENV = "QCONFORM_CERTIFY_KEY"
KEY_LIMIT = 1 << 14            # a PEM key is a few hundred bytes
ENVELOPE_LIMIT = 64 << 20


def default_key_path() -> Path:
    """The user's signing key: ``$QCONFORM_CERTIFY_KEY``, else ``~/.config/qconform/certify-ed25519.pem``."""
    value = os.environ.get(KEY_ENV)
    if value and value.strip():
        return Path(value).expanduser()
    return Path.home() / ".config" / "qconform" / "certify-ed25519.pem"


def public_path(private: str | Path) -> Path:
    return Path(str(private) + ".pub")


# ----------------------------------------------------------------------------- strict JSON

def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r} in one object")
        out[k] = v
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def strict_loads(text: str | bytes) -> Any:
    """JSON as RFC 8259 has it, refusing what readers disagree on: a key twice in one object (one
    reader takes the first, another the last), NaN and Infinity. Raises ValueError."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deep") from None


# ----------------------------------------------------------------------------- keys

def keyid_of(public) -> str:
    """The fingerprint of an Ed25519 public key, as securesystemslib's SSlibKey computes its keyid."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    doc = {"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": raw.hex()}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Signer:
    """A loaded private key, where it came from and its public key's fingerprint."""
    key: Any
    path: Path
    keyid: str
    created: bool = False   # made now (the user's default key, first use)

    def public_pem(self) -> bytes:
        return self.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)


def _read_key_file(path: Path, what: str, field: str, private: bool) -> bytes:
    def check(st: os.stat_result) -> str | None:
        if private and hasattr(os, "getuid") and st.st_uid != os.getuid():
            return "is not owned by this user"
        if private and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            return f"is readable or writable by others (mode {stat.S_IMODE(st.st_mode):o}): chmod 600 it"
        return None
    try:
        return keyed.read_regular(path, KEY_LIMIT, check, follow=True)
    except FileNotFoundError:
        raise QconformError(f"no such {what} file (make a key pair with `qconform keygen -o FILE`)",
                            source=str(path), field=field, rule="a key file that exists") from None
    except keyed.FileRefused as e:
        raise QconformError(f"{what} file {e}", source=str(path), field=field,
                            rule=f"a regular {what} file of at most {KEY_LIMIT} bytes") from None
    except OSError as e:
        raise QconformError(f"cannot read the {what} file: {e.strerror or e}", source=str(path), field=field,
                            rule="a readable key file") from None


def _parse_key(data: bytes, p: Path, field: str, load, kind, label: str, what: str, rule: str):
    """``load(data)``, a ``kind`` key (an "``label`` key"), or one QconformError naming the file."""
    try:
        key = load(data)
    except (ValueError, TypeError) as e:
        raise QconformError(f"not {what} ({str(e)[:120]})", source=str(p), field=field, rule=rule) from None
    if not isinstance(key, kind):
        raise QconformError(f"a {type(key).__name__}, not an {label} key", source=str(p), field=field, rule=rule)
    return key


def load_signer(path: str | Path, field: str = "--certify-key") -> Signer:
    """The Ed25519 private key in the PEM file ``path``. Any problem (missing, not a regular file,
    a FIFO, /dev/zero, unsafe mode, not an Ed25519 PEM key) is one QconformError naming it."""
    p = Path(path)
    key = _parse_key(_read_key_file(p, "signing key", field, private=True), p, field,
                     lambda d: serialization.load_pem_private_key(d, password=None), ed25519.Ed25519PrivateKey,
                     "Ed25519", "an unencrypted PEM private key", "an Ed25519 key of `qconform keygen`")
    return Signer(key, p, keyid_of(key.public_key()))


def load_public(path: str | Path, field: str = "--public-key"):
    """The Ed25519 public key in the PEM file ``path`` (a QconformError otherwise)."""
    p = Path(path)
    data = _read_key_file(p, "public key", field, private=False)
    if b"PRIVATE KEY" in data:
        raise QconformError("this is a private key: give the public one (its .pub file); an auditor never needs "
                            "the private key", source=str(p), field=field, rule="a public key")
    return _parse_key(data, p, field, serialization.load_pem_public_key, ed25519.Ed25519PublicKey,
                      "Ed25519 public", "a PEM public key", "the .pub file of `qconform keygen`")


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def keygen(path: str | Path, field: str = "-o") -> Signer:
    """A new key pair: ``path`` (private, 0600) and ``path``.pub. Never overwrites a file."""
    p, pub = Path(path), public_path(path)
    for f in (p, pub):
        if os.path.lexists(f):
            raise QconformError("exists already: a key is never overwritten (remove it, or name another file)",
                                source=str(f), field=field, rule="a new file")
    key = ed25519.Ed25519PrivateKey.generate()
    p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        _write_new(p, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()), 0o600)
        signer = Signer(key, p, keyid_of(key.public_key()), created=True)
        _write_new(pub, signer.public_pem(), 0o644)
    except FileExistsError as e:   # (a race with another keygen: theirs stands)
        raise QconformError("exists already", source=str(e.filename), field=field, rule="a new file") from None
    except OSError as e:
        raise QconformError(f"cannot write the key: {e.strerror or e}", source=str(e.filename or p), field=field,
                            rule="a writable folder") from None
    return signer


def signing_key(path: str | Path | None) -> Signer:
    """The key a ``--certify`` run signs with: the file given, else the user's default one (made
    now if there is none: ``Signer.created`` says so)."""
    if path is not None:
        return load_signer(path)
    p = default_key_path()
    if not os.path.lexists(p):
        try:
            return keygen(p, field=KEY_ENV)
        except QconformError:
            if not os.path.lexists(p):
                raise
    return load_signer(p, field=f"the user's signing key (${KEY_ENV})")


# ----------------------------------------------------------------------------- envelope

def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature is over."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def statement(predicate: dict, subjects: list[dict]) -> dict:
    return {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": PREDICATE_TYPE, "predicate": predicate}


def seal(predicate: dict, subjects: list[dict], signer: Signer) -> dict:
    """The DSSE envelope of the Statement of ``predicate`` about ``subjects``, signed by ``signer``."""
    body = json.dumps(statement(predicate, subjects), sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()
    sig = signer.key.sign(pae(PAYLOAD_TYPE, body))
    return {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(body).decode(),
            "signatures": [{"keyid": signer.keyid, "sig": base64.b64encode(sig).decode()}]}


class Envelope:
    """A parsed certificate.json: its shape checked, nothing trusted until :meth:`check` says so."""

    def __init__(self, doc: Any):
        if not isinstance(doc, dict) or set(doc) - {"payloadType", "payload", "signatures"} \
                or not isinstance(doc.get("payloadType"), str) or not isinstance(doc.get("payload"), str) \
                or not isinstance(doc.get("signatures"), list) or not doc["signatures"]:
            raise ValueError("not a DSSE envelope (payloadType, payload, signatures)")
        sigs = doc["signatures"]
        if not all(isinstance(s, dict) and isinstance(s.get("keyid"), str) and isinstance(s.get("sig"), str)
                   for s in sigs):
            raise ValueError("a signature is not {keyid, sig}")
        if doc["payloadType"] != PAYLOAD_TYPE:
            raise ValueError(f"payloadType {doc['payloadType']!r}, not {PAYLOAD_TYPE}")
        try:
            self.payload = base64.b64decode(doc["payload"], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("payload is not base64") from None
        self.doc = doc
        self.keyids = [s["keyid"] for s in sigs]

    def check(self, public) -> tuple[str, str]:
        """("valid" | "other key" | "forged", the message): the signature of ``public``'s keyid
        over the payload. A key of another fingerprint is never called a forgery."""
        kid = keyid_of(public)
        mine = [s for s in self.doc["signatures"] if s["keyid"] == kid]
        if not mine:
            return "other key", (f"the public key given (keyid {kid[:16]}) is not the key that signed this certificate "
                                 f"(keyid {', '.join(k[:16] for k in self.keyids)}): ask the signer for their public "
                                 f"key; nothing was checked")
        for s in mine:
            try:
                public.verify(base64.b64decode(s["sig"], validate=True), pae(PAYLOAD_TYPE, self.payload))
                return "valid", f"signature valid: Ed25519, keyid {kid[:16]}"
            except (InvalidSignature, binascii.Error, ValueError):
                continue
        return "forged", (f"signature does NOT verify with the signer's key (keyid {kid[:16]}): the certificate was "
                          f"edited after it was signed, or forged")

    def statement(self) -> dict:
        """The payload's Statement (call after :meth:`check` said valid, or for display only)."""
        st = strict_loads(self.payload)
        if not isinstance(st, dict) or st.get("_type") != STATEMENT_TYPE or st.get("predicateType") != PREDICATE_TYPE \
                or not isinstance(st.get("predicate"), dict) or not isinstance(st.get("subject"), list):
            raise ValueError(f"the payload is not an in-toto Statement of predicateType {PREDICATE_TYPE}")
        return st
