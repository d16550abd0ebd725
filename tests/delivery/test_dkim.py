"""DKIM: the bytes a server receives verify with dkimpy against the public key, one-click headers signed.

The signer computes the signature with OpenSSL (rsa-sha256, ed25519-sha256) and must produce what
dkimpy itself would; dkimpy (with PyNaCl for Ed25519) is the independent verifier throughout.
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
from datetime import UTC, datetime
from pathlib import Path

import dkim
import pytest
import time_machine
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)
from dkim.canonicalization import Relaxed

from digest import daily
from digest.app import App
from digest.delivery.dkim import SIGNED_HEADERS, DkimSigner, Signature, canonical_body, split_message
from digest.delivery.dkim_keys import load_signing_key
from digest.errors import ConfigError

from ..conftest import DAY, SEEDS
from ..smtpd import Recorder, smtp_server

FROM = "news@digest.example.org"
REQUIRED = {"from", "to", "subject", "date", "message-id", "list-unsubscribe", "list-unsubscribe-post"}


@pytest.fixture(scope="module")
def keys() -> tuple[bytes, bytes]:
    """A 2048-bit RSA key made for the test (PEM) and its DNS TXT record."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL, NoEncryption())
    der = key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return pem, b"v=DKIM1; k=rsa; p=" + base64.b64encode(der)


@pytest.fixture(scope="module")
def ed_keys() -> tuple[bytes, bytes]:
    """An Ed25519 key made for the test (PKCS8 PEM) and its DNS TXT record (RFC 8463: the raw 32 bytes)."""
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return pem, b"v=DKIM1; k=ed25519; p=" + base64.b64encode(raw)


def resolver(txt: bytes, ed_txt: bytes | None = None):
    """A DNS lookup that knows only the selector records `mail._domainkey` (and `ed._domainkey`)."""
    records = {b"mail._domainkey.digest.example.org.": txt, b"ed._domainkey.digest.example.org.": ed_txt}

    def lookup(name: bytes, timeout: float = 5) -> bytes | None:
        return records.get(name)
    return lookup


def tags(data: bytes) -> dict[str, str]:
    header = re.search(rb"^DKIM-Signature: (.*?)\r\n(?! )", data, flags=re.S | re.M)
    assert header, "no DKIM-Signature header"
    value = re.sub(rb"\s+", b"", header.group(1)).decode()
    return dict(part.split("=", 1) for part in value.split(";") if part)


@pytest.mark.slow
def test_every_received_digest_verifies(smtp_app, keys, monkeypatch):
    """Each message the server got starts with a DKIM-Signature that verifies and covers the one-click headers."""
    pem, txt = keys
    monkeypatch.setenv("DIGEST_DKIM_KEY", pem.decode())
    server = Recorder()
    with smtp_server(server) as port:
        report = daily.send(smtp_app(port, dkim={"selector": "mail"}, newsletter={"from_address": FROM}), DAY)
    assert report.count("sent") == 4 and len(server.messages) == 4
    for received in server.messages:
        assert received.data.startswith(b"DKIM-Signature: ")
        assert dkim.verify(received.data, dnsfunc=resolver(txt))
        signed = tags(received.data)
        assert (signed["d"], signed["s"], signed["a"], signed["c"]) == (
            "digest.example.org", "mail", "rsa-sha256", "relaxed/relaxed")
        assert set(signed["h"].split(":")) >= REQUIRED


@pytest.mark.slow
def test_altered_message_fails_verification(smtp_app, keys, monkeypatch):
    """Changing the subject, the one-click header or the body after signing breaks the signature."""
    pem, txt = keys
    monkeypatch.setenv("DIGEST_DKIM_KEY", pem.decode())
    server = Recorder()
    with smtp_server(server) as port:
        signing = smtp_app(port, dkim={"selector": "mail"}, newsletter={"from_address": FROM})
        daily.send(signing, DAY, only="ada@example.org")
    [received] = server.messages
    data = received.data
    assert dkim.verify(data, dnsfunc=resolver(txt))
    for old, new in ((b"\r\nSubject: ", b"\r\nSubject: Re: "),
                     (b"List-Unsubscribe=One-Click", b"List-Unsubscribe=Two-Clicks"),
                     (b"\r\nHi Ada", b"\r\nHi Eve")):
        assert old in data
        assert not dkim.verify(data.replace(old, new, 1), dnsfunc=resolver(txt))


@pytest.mark.slow
def test_key_file_signs_outbox_messages_too(make_config, keys, tmp_path):
    """A key read from dkim.key_file signs what the outbox writes, with dkim.domain as d=."""
    pem, txt = keys
    (tmp_path / "dkim.pem").write_bytes(pem)
    (tmp_path / "dkim.pem").chmod(0o600)
    config = make_config(dkim={"selector": "mail", "domain": "digest.example.org", "key_file": "dkim.pem"})
    app = App(config)
    app.ingest([SEEDS], seen_on=DAY)
    assert daily.send(app, DAY, only="ada@example.org").count("sent") == 1
    app.close()
    [eml] = (Path(config.delivery.outbox) / DAY.isoformat()).glob("*.eml")
    assert dkim.verify(eml.read_bytes(), dnsfunc=resolver(txt))


@pytest.mark.slow
@pytest.mark.parametrize("settings, environ, message", [
    ({"selector": "mail"}, {}, "there is no key: set dkim.key_file or the environment variable DIGEST_DKIM_KEY"),
    ({"selector": "mail"}, {"DIGEST_DKIM_KEY": "not a key"},
     "the environment variable DIGEST_DKIM_KEY (dkim.key_env) is not a PEM private key"),
    ({"selector": "mail", "key_file": "missing.pem"}, {}, "cannot read dkim.key_file"),
    ({"selector": "m;x=y"}, {"DIGEST_DKIM_KEY": "k"}, "dkim.selector 'm;x=y' is not a DNS name"),
])
def test_dkim_settings_errors_stop_the_send_before_it_starts(make_config, monkeypatch, settings, environ, message):
    """A selector without a usable key, or a selector that is not a DNS name, is a settings error; nothing is sent."""
    monkeypatch.delenv("DIGEST_DKIM_KEY", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    app = App(make_config(dkim=settings))
    app.ingest([SEEDS], seen_on=DAY)
    with pytest.raises(ConfigError, match=re.escape(message)):
        daily.send(app, DAY)
    assert app.store.deliveries_on(DAY) == []
    app.close()


def unsigned_digests(make_config) -> list[bytes]:
    """The four example subscribers' digests for DAY as the outbox writes them, without DKIM."""
    config = make_config()
    app = App(config)
    app.ingest([SEEDS], seen_on=DAY)
    assert daily.send(app, DAY).count("sent") == 4
    app.close()
    return [eml.read_bytes() for eml in sorted((Path(config.delivery.outbox) / DAY.isoformat()).glob("*.eml"))]


def signer(pem: bytes, algorithm: str = "rsa-sha256", selector: str = "mail") -> DkimSigner:
    return DkimSigner([Signature(selector, "digest.example.org", load_signing_key(pem, algorithm, "test key"))])


# Messages dkimpy parses in other ways than the usual CRLF digest: bare LFs, no body, no blank
# line at all, tabs and trailing whitespace, blank lines at the end, a folded signed header.
ODD_MESSAGES = [
    b"From: a@digest.example.org\nTo: b@example.org\nSubject: bare  LF\t\n\nline \t \nx\n\n\n",
    b"From: a@digest.example.org\r\nSubject: no body\r\n\r\n",
    b"From: a@digest.example.org\r\nSubject: no blank line\r\n",
    b"From: a@digest.example.org\r\nSubject:\t folded\r\n  \tover two  lines \r\n\r\n a\t\tb  \r\n\r\n",
    b"From: a@digest.example.org\r\nTo: b@example.org\r\n\r\nmixed\r\nends\nhere\r \r\n \r\n",
]


def dkimpy_key(pem: bytes, algorithm: str) -> bytes:
    """The key as dkimpy's signing takes it: the PEM for RSA, the base64 raw 32 bytes (PyNaCl's form) for Ed25519."""
    if algorithm == "rsa-sha256":
        return pem
    key = load_pem_private_key(pem, password=None)
    return base64.b64encode(key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["rsa-sha256", "ed25519-sha256"])
def test_signature_is_byte_for_byte_what_dkimpy_makes(make_config, keys, ed_keys, algorithm):
    """For the same message, key and second, the header is exactly dkimpy's own (RSA via OpenSSL, Ed25519 too)."""
    pem = keys[0] if algorithm == "rsa-sha256" else ed_keys[0]
    ours = signer(pem, algorithm)
    with time_machine.travel(datetime(2026, 6, 12, 7, 30, tzinfo=UTC), tick=False):
        for data in unsigned_digests(make_config) + ODD_MESSAGES:
            expected = dkim.sign(data, b"mail", b"digest.example.org", dkimpy_key(pem, algorithm),
                                 canonicalize=(b"relaxed", b"relaxed"), signature_algorithm=algorithm.encode(),
                                 include_headers=[h.encode() for h in SIGNED_HEADERS], linesep=b"\r\n")
            assert b"t=1781249400;" in expected
            assert ours(data) == expected + data


def test_canonical_body_equals_dkimpys_relaxed_body():
    """The fast relaxed body canonicalisation gives dkimpy's bytes for random runs of WSP, CR, LF and text."""
    pieces = [b" ", b"  ", b"\t", b" \t ", b"\r\n", b"\r", b"\n", b"a", b"bc ", b"\r\n\r\n", b"=20", b"\xe2\x80\x94"]
    rng = random.Random(8463)
    bodies = [b"", b"\r\n", b"\r\n\r\n", b" ", b" \r\n", b"\t\r\n\r\n"]
    bodies += [b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(3000)]
    for body in bodies:
        assert canonical_body(body) == Relaxed.canonicalize_body(body), body


@pytest.mark.slow
def test_split_message_matches_dkimpys_parser(make_config):
    """Headers and body come out as dkim.rfc822_parse gives them, for digests and for odd messages alike."""
    for data in unsigned_digests(make_config) + ODD_MESSAGES:
        assert split_message(data) == dkim.rfc822_parse(data)


@pytest.mark.slow
def test_ed25519_alone_verifies_with_dkimpy(smtp_app, ed_keys, monkeypatch):
    """dkim.algorithm = ed25519-sha256 signs every delivered digest with the Ed25519 key (RFC 8463), and it verifies."""
    pem, txt = ed_keys
    monkeypatch.setenv("DIGEST_DKIM_KEY", pem.decode())
    server = Recorder()
    with smtp_server(server) as port:
        report = daily.send(smtp_app(port, dkim={"selector": "ed", "algorithm": "ed25519-sha256"},
                          newsletter={"from_address": FROM}), DAY)
    assert report.count("sent") == 4 and len(server.messages) == 4
    for received in server.messages:
        assert received.data.count(b"DKIM-Signature: ") == 1
        signed = tags(received.data)
        assert (signed["a"], signed["s"], signed["c"]) == ("ed25519-sha256", "ed", "relaxed/relaxed")
        assert dkim.verify(received.data, dnsfunc=resolver(b"", txt))
        assert not dkim.verify(received.data.replace(b"\r\nHi ", b"\r\nHey ", 1), dnsfunc=resolver(b"", txt))


@pytest.mark.slow
def test_dual_signing_adds_an_ed25519_signature_beside_rsa(make_config, keys, ed_keys, tmp_path, monkeypatch):
    """With dkim.ed25519_selector both signatures are added, RSA on top; each verifies, and a change breaks both."""
    (tmp_path / "ed.pem").write_bytes(ed_keys[0])
    (tmp_path / "ed.pem").chmod(0o600)
    monkeypatch.setenv("DIGEST_DKIM_KEY", keys[0].decode())
    config = make_config(dkim={"selector": "mail", "domain": "digest.example.org", "ed25519_selector": "ed",
                               "ed25519_key_file": "ed.pem"})
    app = App(config)
    app.ingest([SEEDS], seen_on=DAY)
    assert daily.send(app, DAY, only="ada@example.org").count("sent") == 1
    app.close()
    [eml] = (Path(config.delivery.outbox) / DAY.isoformat()).glob("*.eml")
    data = eml.read_bytes()
    dns = resolver(keys[1], ed_keys[1])
    first, second = re.findall(rb"^DKIM-Signature:.*?; a=([a-z0-9-]+);", data, flags=re.M)
    assert (first, second) == (b"rsa-sha256", b"ed25519-sha256")
    message = dkim.DKIM(data)
    assert message.verify(idx=0, dnsfunc=dns) and message.verify(idx=1, dnsfunc=dns)
    altered = dkim.DKIM(data.replace(b"\r\nSubject: ", b"\r\nSubject: Re: ", 1))
    assert not altered.verify(idx=0, dnsfunc=dns) and not altered.verify(idx=1, dnsfunc=dns)


def test_the_key_is_read_once_when_the_signer_is_made(make_config, keys, tmp_path):
    """Everything but the message is prepared up front: the key file can go once the signer exists."""
    pem, txt = keys
    (tmp_path / "dkim.pem").write_bytes(pem)
    (tmp_path / "dkim.pem").chmod(0o600)
    config = make_config(dkim={"selector": "mail", "domain": "digest.example.org", "key_file": "dkim.pem"})
    sign = DkimSigner.from_config(config, {})
    (tmp_path / "dkim.pem").unlink()
    message = b"From: a@digest.example.org\r\nTo: b@example.org\r\nSubject: hi\r\n\r\nbody\r\n"
    assert sign is not None and dkim.verify(sign(message), dnsfunc=resolver(txt))


def small_rsa_pem() -> bytes:
    """A 512-bit RSA key (cryptography will not generate one; receivers reject them), from two random primes."""
    def prime(bits: int, rng: random.Random) -> int:
        while True:
            n = rng.getrandbits(bits) | (3 << bits - 2) | 1  # top two bits set: the product has 2 * bits
            if all(pow(a, n - 1, n) == 1 for a in (2, 3, 5, 7, 11, 13, 17)):
                return n
    rng = random.Random(512)
    p, q, e = prime(256, rng), prime(256, rng), 65537
    d = pow(e, -1, (p - 1) * (q - 1))
    key = rsa.RSAPrivateNumbers(p, q, d, d % (p - 1), d % (q - 1), pow(q, -1, p),
                                rsa.RSAPublicNumbers(e, p * q)).private_key()
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())


def bad_key_files(keys, ed_keys, tmp_path: Path) -> dict[str, Path]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    contents = {
        "ed25519.pem": ed_keys[0],
        "rsa.pem": keys[0],
        "rsa.der": rsa_key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption()),
        "public.pem": rsa_key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo),
        "encrypted.pem": rsa_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"pw")),
        "damaged.pem": keys[0].replace(keys[0].splitlines()[5], b"A" * 64),
        "small.pem": small_rsa_pem(),
    }
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
        (tmp_path / name).chmod(0o600)
    (tmp_path / "folder.pem").mkdir()
    return {name: tmp_path / name for name in [*contents, "folder.pem"]}


@pytest.mark.slow
@pytest.mark.parametrize("settings, message", [
    ({"key_file": "ed25519.pem"},
     "dkim.key_file {dir}/ed25519.pem holds an Ed25519 key, but dkim.algorithm = rsa-sha256 needs an RSA key"),
    ({"algorithm": "ed25519-sha256", "key_file": "rsa.pem"},
     "dkim.key_file {dir}/rsa.pem holds a 2048-bit RSA key, but dkim.algorithm = ed25519-sha256 needs an Ed25519 key"),
    ({"key_file": "rsa.pem", "ed25519_selector": "ed", "ed25519_key_file": "rsa.pem"},
     "dkim.ed25519_key_file {dir}/rsa.pem holds a 2048-bit RSA key, but dkim.ed25519_selector needs an Ed25519 key"),
    ({"key_file": "missing.pem"}, "cannot read dkim.key_file {dir}/missing.pem: No such file or directory"),
    ({"key_file": "folder.pem"}, "cannot read dkim.key_file {dir}/folder.pem: Is a directory"),
    ({"key_file": "rsa.pem", "ed25519_selector": "ed", "ed25519_key_file": "gone.pem"},
     "cannot read dkim.ed25519_key_file {dir}/gone.pem: No such file or directory"),
    ({"key_file": "rsa.der"}, "dkim.key_file {dir}/rsa.der is not a PEM private key"),
    ({"key_file": "public.pem"}, "dkim.key_file {dir}/public.pem holds a PEM PUBLIC KEY, not a private key"),
    ({"key_file": "encrypted.pem"}, "dkim.key_file {dir}/encrypted.pem is encrypted"),
    ({"key_file": "damaged.pem"},
     "dkim.key_file {dir}/damaged.pem holds a PEM RSA PRIVATE KEY that cannot be read as a key"),
    ({"key_file": "small.pem"},
     "dkim.key_file {dir}/small.pem holds a 512-bit RSA key; receivers reject keys under 1024"),
    ({"key_file": "rsa.pem", "ed25519_selector": "ed"},
     "dkim.ed25519_selector is set but there is no key: set dkim.ed25519_key_file or the environment variable "
     "DIGEST_DKIM_ED25519_KEY (dkim.ed25519_key_env)"),
    ({"key_file": "rsa.pem", "ed25519_selector": "e d", "ed25519_key_file": "ed25519.pem"},
     "dkim.ed25519_selector 'e d' is not a DNS name"),
    ({"algorithm": "ed25519-sha256", "key_file": "ed25519.pem", "ed25519_selector": "ed"},
     "dkim.ed25519_selector adds an Ed25519 signature beside an RSA one, but dkim.algorithm is already"),
])
def test_bad_key_input_is_a_one_line_error_naming_setting_and_file(make_config, keys, ed_keys, tmp_path, monkeypatch,
                                                                   settings, message):
    """A key of the wrong type, an unreadable file or one that is not a usable PEM key stops the send: one line."""
    monkeypatch.delenv("DIGEST_DKIM_ED25519_KEY", raising=False)
    bad_key_files(keys, ed_keys, tmp_path)
    app = App(make_config(dkim={"selector": "mail", **settings}))
    app.ingest([SEEDS], seen_on=DAY)
    with pytest.raises(ConfigError) as caught:
        daily.send(app, DAY)
    text = str(caught.value)
    assert message.format(dir=tmp_path) in text
    assert "\n" not in text
    assert app.store.deliveries_on(DAY) == []
    app.close()


def test_a_key_from_the_environment_of_the_wrong_type_names_the_variable(make_config, ed_keys):
    """The key in dkim.key_env is checked like a file, and the error names the variable and the setting."""
    with pytest.raises(ConfigError, match=re.escape(
            "the environment variable DIGEST_DKIM_KEY (dkim.key_env) holds an Ed25519 key, but dkim.algorithm = "
            "rsa-sha256 needs an RSA key")):
        DkimSigner.from_config(make_config(dkim={"selector": "mail"}), {"DIGEST_DKIM_KEY": ed_keys[0].decode()})


def test_signing_key_signs_the_digest_as_its_algorithm_says(keys, ed_keys):
    """RSA signs PKCS#1 v1.5 over the SHA-256 DigestInfo, Ed25519 the 32-byte hash itself; both deterministic."""
    digest = hashlib.sha256(b"headers").digest()
    rsa_key = load_signing_key(keys[0], "rsa-sha256", "test")
    public = load_pem_private_key(keys[0], None).public_key()
    public.verify(rsa_key.sign(digest), b"headers", padding.PKCS1v15(), SHA256())  # raises when it does not verify
    ed_key = load_signing_key(ed_keys[0], "ed25519-sha256", "test")
    load_pem_private_key(ed_keys[0], None).public_key().verify(ed_key.sign(digest), digest)
    assert (rsa_key.algorithm, rsa_key.bits, ed_key.algorithm) == ("rsa-sha256", 2048, "ed25519-sha256")
