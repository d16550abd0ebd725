"""MIME: structure, headers, one-click unsubscribe, and no header injection from untrusted text."""

from __future__ import annotations

import email
import html
import re
from datetime import UTC, date, datetime
from email import policy

import pytest

from digest.delivery.message import build_message, is_keyed, message_id, stored_header
from digest.models import Links, Newsletter, Rendered, Subscriber

DAY = date(2026, 6, 12)
KEY = b"the store's Message-ID key"
NEWS = Newsletter(name="Kernel Weekly", from_address="news@digest.example.org", reply_to="editor@example.org",
                  base_url="https://digest.example.org", unsubscribe_mailto="unsub@digest.example.org")
RENDERED = Rendered(subject="Kernel Weekly — 12 Jun: 3 new papers", preheader="p",
                    html="<html><body><p>Caf\u00e9 \u2014 HTML</p></body></html>", text="Caf\u00e9 \u2014 text\n",
                    links=Links("https://digest.example.org/unsubscribe/TOKEN", "https://x/p"))


def parse(raw: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(raw, policy=policy.default)


def test_multipart_alternative_text_first_html_last():
    """The message is multipart/alternative with the text part first and the HTML part last, both UTF-8."""
    raw = build_message(RENDERED, Subscriber(email="ada@example.org", name="Ada"), NEWS, DAY, id_key=KEY).as_bytes()
    msg = parse(raw)
    assert msg.get_content_type() == "multipart/alternative"
    parts = list(msg.iter_parts())
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
    assert parts[0].get_content().replace("\r\n", "\n") == "Caf\u00e9 \u2014 text\n"
    assert "Caf\u00e9 \u2014 HTML" in html.unescape(parts[1].get_content())
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")


def test_headers_for_bulk_mail():
    """From, To, Subject, Date, Reply-To, Message-ID and the RFC 8058 one-click headers are all set."""
    now = datetime(2026, 6, 12, 7, 30, tzinfo=UTC)
    msg = parse(build_message(RENDERED, Subscriber(email="ada@example.org", name="Ada Lovelace"), NEWS, DAY, id_key=KEY,
                              now=now).as_bytes())
    assert msg["From"] == "Kernel Weekly <news@digest.example.org>"
    assert msg["To"] == "Ada Lovelace <ada@example.org>"
    assert msg["Reply-To"] == "editor@example.org"
    assert msg["Subject"] == RENDERED.subject
    assert msg["Date"] == "Fri, 12 Jun 2026 07:30:00 +0000"
    assert msg["List-Unsubscribe"] == ("<https://digest.example.org/unsubscribe/TOKEN>, "
                                       "<mailto:unsub@digest.example.org?subject=unsubscribe>")
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert msg["Message-ID"] == message_id("ada@example.org", DAY, NEWS.from_address, KEY)


def test_message_id_is_derived_from_subscriber_and_date():
    """The same (subscriber, date, key) always gives the same Message-ID; another date, person or key another one."""
    a = message_id("ada@example.org", DAY, "news@digest.example.org", KEY)
    assert a == message_id("ADA@example.org", DAY, "news@digest.example.org", KEY)
    assert a != message_id("ada@example.org", date(2026, 6, 13), "news@digest.example.org", KEY)
    assert a != message_id("grace@example.org", DAY, "news@digest.example.org", KEY)
    assert a != message_id("ada@example.org", DAY, "news@digest.example.org", b"another store's key")
    assert a.startswith("<digest.2026-06-12.") and a.endswith("@digest.example.org>")
    assert is_keyed(a) and not is_keyed("<digest.2026-06-12.0123456789abcdef0123@digest.example.org>")


def test_the_stored_message_id_is_the_one_the_header_parser_reads():
    """The send path reads a digest's Message-ID as stored (no header parse per message): the same text."""
    msg = build_message(RENDERED, Subscriber(email="ada@example.org", name="Ada"), NEWS, DAY, id_key=KEY)
    assert stored_header(msg, "Message-ID") == str(msg["Message-ID"]) == message_id("ada@example.org", DAY,
                                                                                      NEWS.from_address, KEY)
    assert stored_header(msg, "message-id") == str(msg["Message-ID"])
    assert stored_header(msg, "X-Not-There") is None


def test_crlf_in_name_cannot_add_a_header():
    """A CR/LF in the subscriber's name (or subject) is flattened: no Bcc or other header appears."""
    evil = Subscriber(email="ada@example.org", name="Ada\r\nBcc: victim@evil.example\r\nX-Evil: 1")
    rendered = Rendered(subject="Hi\r\nX-Injected: yes", preheader="", html="<p>x</p>", text="x",
                        links=RENDERED.links)
    raw = build_message(rendered, evil, NEWS, DAY, id_key=KEY).as_bytes()
    msg = parse(raw)
    assert msg["Bcc"] is None and msg["X-Evil"] is None and msg["X-Injected"] is None
    assert msg["To"].addresses[0].addr_spec == "ada@example.org"
    assert b"\r\nBcc:" not in raw and b"\r\nX-Injected:" not in raw


@pytest.mark.parametrize("name", ["=?utf-8?q?Admin_<admin@bank.example>?=",
                                  "=?utf-8?b?QWRtaW4gPGFkbWluQGJhbmsuZXhhbXBsZT4=?=",
                                  "Ada =?utf-8?q?=3Cadmin=40bank=2Eexample=3E?=",
                                  "admin@bank.example", "Admin <admin@bank.example>"])
def test_no_display_name_can_pass_for_an_address(name):
    """Names that hold an address, or are RFC 2047 encoded words that decode to one, never show one in To."""
    raw = build_message(RENDERED, Subscriber(email="ada@example.org", name=name), NEWS, DAY, id_key=KEY).as_bytes()
    to = parse(raw)["To"]
    assert [a.addr_spec for a in to.addresses] == ["ada@example.org"]
    shown = to.addresses[0].display_name
    assert "admin@bank.example" not in shown and "<" not in shown.replace(name, "")
    # The name as written (encoded words shown as text, not decoded), or none. Python's parser keeps the
    # space between two adjacent encoded words, which RFC 2047 (and mail clients) drop: compare without spaces.
    assert shown.replace(" ", "") in ("", name.replace(" ", ""))


def test_non_ascii_name_is_encoded():
    """A non-ASCII display name is RFC 2047 encoded on the wire and decodes back intact."""
    raw = build_message(RENDERED, Subscriber(email="jose@example.org", name="José Müller, Jr."), NEWS,
                        DAY, id_key=KEY).as_bytes()
    assert "José".encode() not in raw.split(b"\r\n\r\n")[0]
    assert parse(raw)["To"].addresses[0].display_name == "José Müller, Jr."


def test_test_send_is_marked():
    """A test send says so in its subject."""
    msg = build_message(RENDERED, Subscriber(email="a@example.org"), NEWS, DAY, id_key=KEY, test=True)
    assert msg["Subject"].startswith("[TEST] ")


def _head(raw: bytes) -> str:
    return raw.split(b"\r\n\r\n")[0].decode("ascii")


def test_list_unsubscribe_url_goes_out_literally():
    """A long one-click URL is never folded into encoded words: a mailbox provider must read it as written."""
    url = "https://digest.example.org/unsubscribe/" + "eyJlIjoiYWRhQGV4YW1wbGUub3JnIn0." + "A" * 120
    rendered = Rendered(subject="s", preheader="", html="<p>x</p>", text="x", links=Links(url, "https://x/p"))
    head = _head(build_message(rendered, Subscriber(email="ada@example.org"), NEWS, DAY, id_key=KEY).as_bytes())
    assert f"List-Unsubscribe: <{url}>" in head
    assert "=?" not in head.split("List-Unsubscribe:")[1].split("\r\nList-Unsubscribe-Post")[0]


def test_long_non_ascii_subject_is_folded_and_decodes_back():
    """A long subject with non-ASCII text is split into encoded words on lines of at most 78 characters."""
    subject = "Kernel Weekly — 12 Jun: 14 new papers on Überfast kernels, Größere Modelle and Café"
    rendered = Rendered(subject=subject, preheader="", html="<p>x</p>", text="x", links=RENDERED.links)
    raw = build_message(rendered, Subscriber(email="a@example.org"), NEWS, DAY, id_key=KEY).as_bytes()
    subject_lines = _head(raw).split("\r\nDate:")[0].split("Subject:")[1].split("\r\n")
    assert len(subject_lines) > 1 and all(len(line) <= 78 - len("Subject:") for line in subject_lines)
    assert parse(raw)["Subject"] == subject


def test_bodies_survive_quoted_printable_exactly():
    """Long lines, trailing spaces, '=' signs, dots and non-ASCII all decode back to the rendered text."""
    text = ("x" * 300 + "\n" + "trailing spaces   \n" + "a=b =3D ==\n" + ".\n" + ".leading dot\n"
            + "naïve – ∑ 🚀\n" + "From the start\n")
    html = "<p style=\"a:b\">" + "y" * 2000 + "</p>\n<p>=?utf-8?q?not-a-word?=</p>\n"
    rendered = Rendered(subject="s", preheader="", html=html, text=text, links=RENDERED.links)
    raw = build_message(rendered, Subscriber(email="a@example.org"), NEWS, DAY, id_key=KEY).as_bytes()
    assert max(len(line) for line in raw.split(b"\r\n\r\n", 1)[1].split(b"\r\n")) <= 76
    plain, rich = parse(raw).iter_parts()
    assert plain.get_content().replace("\r\n", "\n") == text
    assert rich.get_content().replace("\r\n", "\n") == html
    assert all(p["Content-Transfer-Encoding"] == "quoted-printable" for p in (plain, rich))


def test_html_goes_out_as_7bit_with_character_references():
    """Non-ASCII HTML becomes character references in a 7bit part that renders the same characters."""
    page = "<p style=\"color:#111\">Caf\u00e9 \u2014 \U0001F680 a=b</p>\n" * 20
    rendered = Rendered(subject="s", preheader="", html=page, text="t", links=RENDERED.links)
    raw = build_message(rendered, Subscriber(email="a@example.org"), NEWS, DAY, id_key=KEY).as_bytes()
    rich = list(parse(raw).iter_parts())[1]
    assert rich["Content-Transfer-Encoding"] == "7bit"
    assert raw.isascii() and b"=3D" not in raw and b"&#233;" in raw
    assert html.unescape(rich.get_content()).replace("\r\n", "\n") == page


def test_html_that_cannot_be_7bit_is_quoted_printable():
    """A line over 998 octets, a bare CR or the MIME boundary inside the HTML: quoted-printable, decoding back."""
    from digest.delivery.message import BOUNDARY

    for page in ("<p>" + "y" * 999 + "</p>", "<p>a\rb</p>", f"<p>--{BOUNDARY}--</p>\n<p>after</p>"):
        rendered = Rendered(subject="s", preheader="", html=page, text="t", links=RENDERED.links)
        message = parse(build_message(rendered, Subscriber(email="a@example.org"), NEWS, DAY, id_key=KEY).as_bytes())
        plain, rich = message.iter_parts()
        assert rich["Content-Transfer-Encoding"] == "quoted-printable", page[:20]
        assert rich.get_content().replace("\r\n", "\n").replace("\r", "\n") == page.replace("\r", "\n")
        assert plain.get_content() == "t"


def test_plain_headers_match_the_standard_smtp_policy():
    """For plain ASCII values the fast header path writes exactly what email.policy.SMTP writes."""
    from email.message import EmailMessage

    values = {"From": "Kernel Weekly <news@digest.example.org>", "To": '"Lovelace, Ada" <ada@example.org>',
              "Subject": "A plain ASCII subject that is long enough to need folding at the seventy-eight mark",
              "Date": "Fri, 12 Jun 2026 07:30:00 +0000", "X-Digest-Date": "2026-06-12"}
    ours = build_message(RENDERED, Subscriber(email="ada@example.org"), NEWS, DAY, id_key=KEY)
    standard = EmailMessage(policy=policy.SMTP)
    for name, value in values.items():
        del ours[name]
        ours[name] = value
        standard[name] = value
    ours_fields = {f.split(":")[0]: f for f in _head(ours.as_bytes()).split("\r\n") if not f.startswith(" ")}
    ours_head = _head(ours.as_bytes())
    for field in re.split(r"\r\n(?! )", _head(standard.as_bytes())):
        assert field.split(":")[0] in ours_fields
        assert field + "\r\n" in ours_head + "\r\n", field  # the same bytes, folds included


def test_fast_serialiser_writes_what_the_email_generator_writes():
    """`as_bytes` skips the email package's generator for a digest; the bytes must be the generator's exactly."""
    pages = ["<p>Caf\u00e9 \u2014 ok</p>\n" * 30, "<p>" + "y" * 1200 + "</p>", "<p>a\rb\r\nc</p>"]
    texts = ["Caf\u00e9 \u2014 text\n" * 10, "plain ascii\r\nwith CRLF\n", "x" * 300]
    subjects = ["Kernel Weekly — 12 Jun: 3 new papers", "A plain ASCII subject " * 5, "Short"]
    names = ["Ada", "Łukasz \"Ł\" Żółw, PhD", ""]
    for n, (page, text, subject, name) in enumerate(zip(pages, texts, subjects, names, strict=True)):
        rendered = Rendered(subject=subject, preheader="", html=page, text=text, links=RENDERED.links)
        message = build_message(rendered, Subscriber(email="ada@example.org", name=name), NEWS, DAY, id_key=KEY,
                                test=n == 1)
        assert message._is_digest()
        assert message.as_bytes() == message.generated()
    message["X-Extra"] = "added after building: still the generator's bytes"
    assert message.as_bytes() == message.generated()
    message.preamble = "This is a multi-part message."
    assert not message._is_digest() and message.as_bytes() == message.generated()
