"""DKIM: the bytes a server receives verify with dkimpy against the public key, one-click headers signed."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import dkim
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from digest.errors import ConfigError
from digest.pipeline import App

from .conftest import DAY, SEEDS
from .smtpd import Recorder, smtp_server

FROM = "news@digest.example.org"
REQUIRED = {"from", "to", "subject", "date", "message-id", "list-unsubscribe", "list-unsubscribe-post"}


@pytest.fixture(scope="module")
def keys() -> tuple[bytes, bytes]:
    """A 2048-bit RSA key made for the test (PEM) and its DNS TXT record."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL, NoEncryption())
    der = key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return pem, b"v=DKIM1; k=rsa; p=" + base64.b64encode(der)


def resolver(txt: bytes):
    """A DNS lookup that knows only the selector record `mail._domainkey.digest.example.org`."""
    def lookup(name: bytes, timeout: float = 5) -> bytes | None:
        return txt if name == b"mail._domainkey.digest.example.org." else None
    return lookup


def tags(data: bytes) -> dict[str, str]:
    header = re.search(rb"^DKIM-Signature: (.*?)\r\n(?! )", data, flags=re.S | re.M)
    assert header, "no DKIM-Signature header"
    value = re.sub(rb"\s+", b"", header.group(1)).decode()
    return dict(part.split("=", 1) for part in value.split(";") if part)


def test_every_received_digest_verifies(smtp_app, keys, monkeypatch):
    """Each message the server got starts with a DKIM-Signature that verifies and covers the one-click headers."""
    pem, txt = keys
    monkeypatch.setenv("DIGEST_DKIM_KEY", pem.decode())
    server = Recorder()
    with smtp_server(server) as port:
        report = smtp_app(port, dkim={"selector": "mail"}, newsletter={"from_address": FROM}).send(DAY)
    assert report.count("sent") == 4 and len(server.messages) == 4
    for received in server.messages:
        assert received.data.startswith(b"DKIM-Signature: ")
        assert dkim.verify(received.data, dnsfunc=resolver(txt))
        signed = tags(received.data)
        assert (signed["d"], signed["s"], signed["a"], signed["c"]) == (
            "digest.example.org", "mail", "rsa-sha256", "relaxed/relaxed")
        assert set(signed["h"].split(":")) >= REQUIRED


def test_altered_message_fails_verification(smtp_app, keys, monkeypatch):
    """Changing the subject, the one-click header or the body after signing breaks the signature."""
    pem, txt = keys
    monkeypatch.setenv("DIGEST_DKIM_KEY", pem.decode())
    server = Recorder()
    with smtp_server(server) as port:
        smtp_app(port, dkim={"selector": "mail"}, newsletter={"from_address": FROM}).send(DAY, only="ada@example.org")
    [received] = server.messages
    data = received.data
    assert dkim.verify(data, dnsfunc=resolver(txt))
    for old, new in ((b"\r\nSubject: ", b"\r\nSubject: Re: "),
                     (b"List-Unsubscribe=One-Click", b"List-Unsubscribe=Two-Clicks"),
                     (b"\r\nHi Ada", b"\r\nHi Eve")):
        assert old in data
        assert not dkim.verify(data.replace(old, new, 1), dnsfunc=resolver(txt))


def test_key_file_signs_outbox_messages_too(make_config, keys, tmp_path):
    """A key read from dkim.key_file signs what the outbox writes, with dkim.domain as d=."""
    pem, txt = keys
    (tmp_path / "dkim.pem").write_bytes(pem)
    config = make_config(dkim={"selector": "mail", "domain": "digest.example.org", "key_file": "dkim.pem"})
    app = App(config)
    app.ingest([SEEDS], seen_on=DAY)
    assert app.send(DAY, only="ada@example.org").count("sent") == 1
    app.close()
    [eml] = (Path(config.delivery.outbox) / DAY.isoformat()).glob("*.eml")
    assert dkim.verify(eml.read_bytes(), dnsfunc=resolver(txt))


@pytest.mark.parametrize("settings, environ, message", [
    ({"selector": "mail"}, {}, "there is no key: set dkim.key_file or the environment variable DIGEST_DKIM_KEY"),
    ({"selector": "mail"}, {"DIGEST_DKIM_KEY": "not a key"}, "the DKIM key is not a PEM RSA private key"),
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
        app.send(DAY)
    assert app.store.deliveries_on(DAY) == []
    app.close()
