"""``qconform keygen [-o FILE]``: a key pair to sign certificates with (reports/attest.py)."""

from __future__ import annotations


from reports import attest


def register(sub):
    p = sub.add_parser("keygen", help="make an Ed25519 key pair to sign certificates with (pytest --certify)",
                       description="Write an Ed25519 private key (PEM, mode 0600) to FILE and its public key to "
                                   "FILE.pub; never overwrites. Sign with `pytest --certify --certify-key FILE`; "
                                   "an auditor verifies with FILE.pub alone: `qconform certify --verify "
                                   "certificate.json --public-key FILE.pub`.")
    p.add_argument("-o", "--output", default=None, metavar="FILE",
                   help=f"the private key file (default: your signing key, ${attest.KEY_ENV} or "
                        f"~/.config/qconform/certify-ed25519.pem)")
    p.set_defaults(func=run)


def run(args) -> int:
    signer = attest.keygen(args.output or attest.default_key_path())   # (an error: cli.main says it, exit 2)
    print(f"private key {signer.path} (keep it secret)")
    print(f"public key  {attest.public_path(signer.path)} (give it to whoever verifies your certificates)")
    print(f"keyid       {signer.keyid}")
    return 0
