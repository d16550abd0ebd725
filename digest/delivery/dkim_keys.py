"""DKIM private keys: read from PEM once (a key file only when no one else can read it), checked against the
algorithm, signing a SHA-256 digest in OpenSSL."""

from __future__ import annotations

import base64
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_private_key

from digest.errors import ConfigError
from digest.filemodes import OPEN_TO_OTHERS

ALGORITHMS = ("rsa-sha256", "ed25519-sha256")
MIN_RSA_BITS = 1024  # RFC 8301: verifiers must not accept smaller keys (2048 recommended)
_HOW_TO_MAKE = {"rsa-sha256": "openssl genrsa -out dkim.pem 2048",
                "ed25519-sha256": "openssl genpkey -algorithm ed25519 -out dkim-ed25519.pem"}
_PEM_LABEL = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")


class SigningKey:
    """A private key and the DKIM algorithm it signs with: `sign(sha256 digest) -> signature`."""

    algorithm: str
    bits: int

    def __init__(self, key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey) -> None:
        self._sign: Callable[[bytes], bytes]
        self._public = key.public_key()
        if isinstance(key, rsa.RSAPrivateKey):
            self.algorithm, self.bits = "rsa-sha256", key.key_size
            pkcs1, prehashed = padding.PKCS1v15(), Prehashed(SHA256())  # RSASSA-PKCS1-v1_5 over the digest
            self._sign = lambda digest: key.sign(digest, pkcs1, prehashed)
        else:
            # RFC 8463: PureEdDSA over the SHA-256 hash of the canonicalised headers, not over the headers.
            self.algorithm, self.bits = "ed25519-sha256", 256
            self._sign = key.sign

    def __repr__(self) -> str:
        return f"SigningKey({self.algorithm}, {self.bits} bits)"

    def sign(self, digest: bytes) -> bytes:
        """The signature of a SHA-256 `digest`."""
        return self._sign(digest)

    def dns_value(self) -> str:
        """The p= of this key's DNS record, so `digest check` prints the record to publish, not a placeholder:
        base64 of the SubjectPublicKeyInfo for RSA (RFC 6376 3.6.1), of the bare 32 bytes for Ed25519 (RFC 8463)."""
        if isinstance(self._public, ed25519.Ed25519PublicKey):
            raw = self._public.public_bytes(Encoding.Raw, PublicFormat.Raw)
        else:
            raw = self._public.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        return base64.b64encode(raw).decode()


def read_key_file(path: Path, source: str) -> bytes:
    """The PEM in a key file, refused (as ssh refuses a private key) when the file is ours and the group or
    others have any permission on it: whoever can read it can sign mail as the domain."""
    try:
        with path.open("rb") as file:
            st = os.fstat(file.fileno())
            mode = stat.S_IMODE(st.st_mode)
            if st.st_uid == os.geteuid() and mode & OPEN_TO_OTHERS:
                raise ConfigError(f"{source} is open to other users (mode {mode:04o}); a private key must be "
                                  f"yours alone: run `chmod 600 {path}`")
            return file.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {source}: {exc.strerror}") from exc


def load_signing_key(pem: bytes, algorithm: str, source: str, wanted_by: str = "") -> SigningKey:
    """The key in `pem`, which must suit `algorithm`.

    Errors are one line naming `source` (the setting and its file or variable) and, for a key of
    the wrong type, `wanted_by` (the setting that asks for `algorithm`).
    """
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown DKIM algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")
    label = _PEM_LABEL.search(pem)
    if label is None:
        raise ConfigError(f"{source} is not a PEM private key (no '-----BEGIN … PRIVATE KEY-----' line); "
                          f"make one with `{_HOW_TO_MAKE[algorithm]}`")
    if not label.group(1).endswith(b"PRIVATE KEY"):
        raise ConfigError(f"{source} holds a PEM {label.group(1).decode()}, not a private key; "
                          f"make one with `{_HOW_TO_MAKE[algorithm]}`")
    try:
        key = load_pem_private_key(pem, password=None)
    except TypeError as exc:  # cryptography's way of saying "encrypted, and no password given"
        raise ConfigError(f"{source} is encrypted; give the key without a passphrase "
                          "(`openssl pkey -in encrypted.pem -out dkim.pem`) and protect the file instead") from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ConfigError(f"{source} holds a PEM {label.group(1).decode()} that cannot be read as a key "
                          "(damaged, or a kind OpenSSL does not load)") from exc
    wanted = rsa.RSAPrivateKey if algorithm == "rsa-sha256" else ed25519.Ed25519PrivateKey
    if not isinstance(key, wanted):
        raise ConfigError(f"{source} holds {_kind(key)}, but {wanted_by or algorithm} needs "
                          f"{_kind_for(algorithm)}; make one with `{_HOW_TO_MAKE[algorithm]}`")
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size < MIN_RSA_BITS:
        raise ConfigError(f"{source} holds a {key.key_size}-bit RSA key; receivers reject keys under "
                          f"{MIN_RSA_BITS} bits (RFC 8301): make a 2048-bit one with `{_HOW_TO_MAKE[algorithm]}`")
    return SigningKey(key)


def _kind(key: object) -> str:
    if isinstance(key, rsa.RSAPrivateKey):
        return f"a {key.key_size}-bit RSA key"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "an Ed25519 key"
    return f"a key of another kind ({type(key).__name__.removeprefix('_')})"


def _kind_for(algorithm: str) -> str:
    return "an RSA key" if algorithm == "rsa-sha256" else "an Ed25519 key"
