"""Addresses from outside (signup form, imports, profiles) are one mailbox each, and every To header built from one
carries exactly that one recipient, whatever the subscriber's name."""

from __future__ import annotations

import base64
from datetime import date
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import getaddresses

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from digest.delivery.message import build_message
from digest.models import Links, Newsletter, Rendered, Subscriber
from digest.signup.signups import _recipient
from digest.store import Store
from digest.subscribers.addresses import address_problem, header_address, is_email
from digest.subscribers.profiles import parse_profile
from digest.subscribers.roster import import_path

from ..signup.test_signups import make_site

# The issue's address: its local part is an encoded word hiding "victim@gmail.com>,<a", so that a To header built
# from it read `To: Reader <victim@gmail.com>,<a@attacker.example>` (two recipients, one of them the attacker).
ENCODED = "=?utf-8?b?" + base64.b64encode(b"victim@gmail.com>,<a").decode() + "?=@attacker.example"

HOSTILE = [
    ENCODED,
    "=?utf-8?q?a?=@example.org",
    "ada@=?utf-8?q?example?=.org",
    "Ada <ada@example.org>",  # a display name
    "<ada@example.org>",  # angle brackets
    "ada@example.org, eve@example.org",  # two addresses
    "ada@example.org,eve@example.org",
    "ada@example.org;eve@example.org",
    "ada@example.org\r\nBcc: eve@example.org",  # a header of its own
    "ada@example.org\n",
    '"ada eve"@example.org',  # a quoted local part
    '"a,b"@example.org',
    "ada@[127.0.0.1]",  # an IP-literal domain
    "ada @example.org",
    "ada(comment)@example.org",
    "a\\b@example.org",
    "ädä@example.org",  # needs SMTPUTF8
    "ada@exämple.org",
    "ada@localhost",  # no dot, and a special-use name
    "ada@example.test",
    "ada..lovelace@example.org",
    ".ada@example.org",
    "ada@example..org",
    "ada@-example.org",
    "ada@@example.org",
    "ada@b@example.org",
    "a" * 65 + "@example.org",  # local part over 64
    "a@" + "b" * 250 + ".org",  # over 254 in all
    "",
    "@example.org",
    "ada@",
]
GOOD = ["ada@example.org", "Ada.Lovelace@Example.ORG", "o'brien@example.org", "a+digest@example.org",
        "x_y-z@mail.example.co.uk", "a@xn--r8jz45g.jp", "a" * 64 + "@example.org", "{~}|!#$%&*/^`@example.org"]


@pytest.mark.slow
@pytest.mark.parametrize("address", HOSTILE)
def test_hostile_addresses_are_refused_with_a_reason(address):
    """Encoded words, display names, brackets, lists, CR/LF, quotes, literals and non-ASCII are each refused."""
    problem = address_problem(address)
    assert problem and "\n" not in problem and not is_email(address)


@pytest.mark.parametrize("address", GOOD)
def test_plain_addresses_are_accepted(address):
    """Ordinary addresses (plus tags, apostrophes, capitals, an xn-- domain, 64 characters before the @) pass."""
    assert address_problem(address) is None and header_address(address) == address


def test_the_encoded_word_of_the_issue_is_one_problem_in_a_profile(tmp_path):
    """A profile file naming the encoded-word address is refused on its `email` line, saying why."""
    path = tmp_path / "eve.toml"
    path.write_text(f'name = "Reader"\nemail = "{ENCODED}"\n')
    subscriber, problems = parse_profile(path)
    assert subscriber is None
    assert [(p.line, "encoded word" in p.message) for p in problems] == [(2, True)]


def test_an_import_refuses_a_bad_address_on_its_line_and_keeps_the_others(tmp_path):
    """Each hostile address in an import is a problem on its row; the plain addresses around them are stored."""
    rows = ["email,name", "ada@example.org,Ada", *(f'"{a}",Eve' for a in HOSTILE if '"' not in a and a),
            "grace@example.org,Grace"]
    path = tmp_path / "list.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    store = Store(f"sqlite:///{tmp_path / 'digest.db'}")
    try:
        report = import_path(store, path)
        assert report.imported == 2
        assert sorted(s.email for s in store.iter_subscribers()) == ["ada@example.org", "grace@example.org"]
    finally:
        store.close()
    lines = sorted({p.line for p in report.problems})
    assert all(str(p).startswith(f"{path}:") and "\n" not in str(p) for p in report.problems)
    assert len(lines) == len(rows) - 3  # every hostile row, and only those


def test_the_signup_form_refuses_the_encoded_word_and_sends_nothing(tmp_path, monkeypatch):
    """Over real HTTP: the issue's address gets the form back (422) and no confirmation email goes anywhere."""
    for site in make_site(tmp_path, monkeypatch):
        response = site.signup(ENCODED, name="Reader")
        assert response.status_code == 422 and "Enter your email address" in response.text
        assert site.inbox.messages == [] and site.app.store.signup(ENCODED) is None
        good = site.signup("reader@example.org", name="Reader")
        assert good.status_code == 200
        [mail] = site.inbox.messages
        assert list(mail.rcpt_tos) == ["reader@example.org"]
        assert [a.addr_spec for a in mail.message["To"].addresses] == ["reader@example.org"]


def test_an_address_kept_from_before_gets_no_header():
    """A hostile address already in a store (from before these checks) fails its own message, never adds a To."""
    with pytest.raises(ValueError, match="not a plain email address"):
        _recipient(Subscriber(email=ENCODED, name="Reader"))
    with pytest.raises(ValueError, match="not a plain email address"):
        _digest(ENCODED, "Reader")


# -- every accepted address is one recipient, whatever the name -----------------------------------------------

ATEXT = "abcxyzABC019!#$%&'*+/=?^_`{|}~-"
PLAIN = st.text(ATEXT, min_size=1, max_size=20)
LOCALS = st.one_of(PLAIN, st.builds("{}.{}".format, PLAIN, PLAIN), st.text(ATEXT + ".", min_size=1, max_size=20),
                   st.sampled_from(["=?utf-8?b?", "?=", "=?x?q?a?="]),
                   st.text(ATEXT + '.@<>,;:"()[]\\ \r\n\t=?é', min_size=0, max_size=12))
FINE = st.sampled_from(["example.org", "mail.example.co.uk", "xn--r8jz45g.jp"])
DOMAINS = st.one_of(FINE, FINE, FINE, st.sampled_from(["localhost", "example.test", "[127.0.0.1]"]),
                    st.text("abcz09-.<>,@=?", min_size=1, max_size=15))
NAMES = st.one_of(st.text(max_size=40), st.sampled_from([
    "", "Reader", "victim@gmail.com", "Eve <eve@example.org>", "a, b", "=?utf-8?b?dmljdGlt?=", "\"quoted\"",
    "back\\slash", "x\r\nBcc: eve@example.org", "Ünïcödé, Name", "(comment)", "a;b:c", "  spaced  "]))


def _digest(email: str, name: str) -> EmailMessage:
    """A digest's message to `email` as the send builds it."""
    links = Links(unsubscribe="https://digest.example.org/u/x", preferences="https://digest.example.org/p/x")
    rendered = Rendered(subject="Papers", preheader="", html="<p>hi</p>", text="hi", links=links)
    return build_message(rendered, Subscriber(email=email, name=name), Newsletter(), date(2026, 6, 12),
                         id_key=b"k" * 32)


def _one_recipient(raw: bytes, email: str) -> None:
    """The To header of `raw`, read as written and as decoded, is exactly `email`."""
    [written] = [line for line in raw.split(b"\r\n\r\n")[0].decode("ascii").replace("\r\n ", " ").split("\r\n")
                 if line.lower().startswith("to:")]
    assert [a for _, a in getaddresses([written[3:]])] == [email]
    parsed = message_from_bytes(raw, policy=policy.default)
    assert [a.addr_spec for a in parsed["To"].addresses] == [email]
    assert [a for _, a in getaddresses([str(parsed["To"])])] == [email]


def _check_headers(email: str, name: str) -> None:
    digest = _digest(email, name)
    _one_recipient(digest.as_bytes(), email)
    signup = EmailMessage(policy=SMTP)
    signup["To"] = _recipient(Subscriber(email=email, name=name))
    signup.set_content("hi")
    _one_recipient(signup.as_bytes(), email)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(local=LOCALS, domain=DOMAINS)
@example(local=ENCODED.split("@")[0], domain="attacker.example")
def test_any_address_is_accepted_or_refused_with_one_line(local, domain):
    """No traceback for any address; a refused one has a one-line reason, an accepted one is one To recipient."""
    email = f"{local}@{domain}"
    problem = address_problem(email)
    if problem is not None:
        assert "\n" not in problem and "\r" not in problem
    else:
        _check_headers(email, "Reader")


@pytest.mark.slow
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(local=st.one_of(PLAIN, st.builds("{}.{}".format, PLAIN, PLAIN)), domain=FINE, name=NAMES)
@example(local="ada", domain="example.org", name="=?utf-8?b?dmljdGltQGdtYWlsLmNvbT4sPGE=?=")
@example(local="ada", domain="example.org", name="Eve <eve@example.org>, x@y.org")
@example(local="ada", domain="example.org", name="x\r\nBcc: eve@example.org")
def test_an_accepted_address_is_one_recipient_whatever_the_name(local, domain, name):
    """Every accepted address gives digests and signup emails exactly one To recipient, whatever the name holds."""
    email = f"{local}@{domain}"
    if is_email(email):  # "=?" can still come out of the atext
        _check_headers(email, name)
    else:
        assert "=?" in email
