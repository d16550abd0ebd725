"""Signups with double opt-in: a reader's form becomes a pending signup and one confirmation email; following the
link (and pressing its button) makes them a web subscriber in the store, records their consent and welcomes them.

Entered by `Signups.request` (a form sent) and `Signups.confirm` (a confirmation button pressed); `Signups.link`
reads a confirmation link. Nothing here knows HTTP: refusals are `Refused` with the status and the words of the
page that says so, and the web side (`digest.web.signup`) shows them.

- One address, one source: an address a profile file or an import has is never given to a signup, nor is its
  profile changed or shown; the signup is recorded as held (the operator sees it) and nothing is sent. The
  reader sees the same "check your inbox" page whatever the address is, so the page tells nobody who subscribes.
- The confirmation link is sealed (AES-SIV, see `tokens`) around the day and second it was made, the address
  and a nonce the store keeps for the latest signup: a forged or altered link is refused before the store is
  asked, an old one expires after `signup.confirm_hours`, and one that was followed, or replaced by a newer
  signup, finds nothing to confirm.
- The IP addresses kept with a consent, and the rate limits' keys, are keyed hashes (HMAC under the link secret):
  the store never holds an address a reader's network had.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, make_msgid
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import available_timezones

from digest.delivery.handover import OutboxTransport, RetryPolicy, Transport, hand_over
from digest.delivery.mailer import make_transport
from digest.delivery.message import one_line
from digest.errors import DigestError
from digest.models import Composed, Interest, Links, Subscriber
from digest.select.corpus import background
from digest.select.explain import chunks
from digest.store.signups import SignupRecord, expiry
from digest.store.subscribers import profile_json, subscriber_of
from digest.subscribers import roster
from digest.subscribers.addresses import is_email, mailbox_parts
from digest.subscribers.libraries import Library, LibraryError, library_interest, read_upload
from digest.subscribers.profiles import check_interest
from digest.subscribers.topics import chosen
from digest.tokens import BadToken

if TYPE_CHECKING:
    from digest.compose import Composer
    from digest.config import Config
    from digest.delivery.mailer import Mailer
    from digest.models import Newsletter
    from digest.render.renderer import Renderer
    from digest.store import Store
    from digest.subscribers.roster import Profiles
    from digest.tokens import LinkMaker, Signer


class Parts(Protocol):
    """What the signup room needs of a command (`app.App` has them)."""

    config: Config
    store: Store
    signer: Signer
    renderer: Renderer
    newsletter: Newsletter
    links: LinkMaker
    composer: Composer
    mailer: Mailer
    profiles: Profiles

log = logging.getLogger("digest")

FORM = "web/subscribe.html.j2"  # the form's wording; its version is a hash of this template (see form_version)
OWN_INTEREST = "In your words"  # the name of an interest whose words give nothing to name it by
NAME_CHARS = 48  # an interest named from its words: at most this long
NAME_PHRASES = 2  # ... from this many of its sentence's most distinctive phrases
LIBRARY_INTEREST = "Your library"  # the interest a library given at signup makes
MAX_NAME = 100
MAX_WORDS_TEXT = 500  # characters of free keywords or sentence
MAX_KEYWORDS = 20
MAX_KEYWORD = 80
SEND_AT = time(7, 0)
MAX_PAPERS = 10
HOUR, DAY = 3600, 86400
_PURPOSE = "signup-confirm"


class Refused(DigestError):
    """A request this room says no to: the HTTP status, and the heading and text of the page that explains."""

    def __init__(self, status: int, heading: str, text: str, *, retry_after: int | None = None) -> None:
        super().__init__(f"{status} {heading}")
        self.status, self.heading, self.text, self.retry_after = status, heading, text, retry_after


class Confirmed(Refused):
    """A used confirmation link followed again by the reader it confirmed, who is still subscribed: their page leads
    on to the papers to rate and their preferences (`links`: theirs, made today). Where it is shown as any refusal,
    it still says the subscription is confirmed."""

    def __init__(self, subscriber: Subscriber, links: Links) -> None:
        super().__init__(200, "You are already confirmed", f"{subscriber.email} gets the digest. Each email has a "
                                                           "link to change your preferences.")
        self.subscriber, self.links = subscriber, links


class Invalid(DigestError):
    """A form with mistakes: each one a sentence for the reader."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class Form:
    """What a reader sent, as text (nothing trusted yet)."""

    email: str = ""
    name: str = ""
    topics: tuple[str, ...] = ()
    words: str = ""  # a sentence about their interests, in their own words
    keywords: str = ""  # keywords, separated by commas
    timezone: str = "UTC"
    frequency: str = "daily"
    honeypot: str = ""  # a field people never see: only a bot fills it
    library: tuple[str, bytes | str] | None = None  # an uploaded export (name, bytes) or pasted ids (PASTED, text)

    @classmethod
    def of(cls, fields: Any, library: tuple[str, bytes | str] | None = None) -> Form:
        """From a form's fields (a werkzeug MultiDict or a plain mapping) and the library it carried, if any."""
        many = fields.getlist("topics") if hasattr(fields, "getlist") else fields.get("topics", [])
        return cls(email=str(fields.get("email", "")).strip(), name=str(fields.get("name", "")),
                   topics=tuple(str(t) for t in many), words=str(fields.get("interests", "")),
                   keywords=str(fields.get("keywords", "")),
                   timezone=str(fields.get("timezone", "")).strip() or "UTC",
                   frequency=str(fields.get("frequency", "daily")), honeypot=str(fields.get("website", "")),
                   library=library)

    @property
    def pasted(self) -> str:
        """The paste box's text (shown again on a form with mistakes; a file cannot be)."""
        return self.library[1] if self.library and isinstance(self.library[1], str) else ""


@dataclass(frozen=True)
class Link:
    """What a valid, unexpired confirmation link says."""

    email: str
    nonce: str
    issued: datetime


@dataclass(frozen=True)
class Welcome:
    """A confirmed signup: the subscriber as stored, whether they were one already, and their first digest today."""

    subscriber: Subscriber
    updated: bool
    preview: Composed | None = None
    links: Any = None
    problems: list[str] = field(default_factory=list)


def rating_url(links: Links) -> str:
    """The welcome page's papers to rate (`/welcome/<the reader's feedback token>`), beside a reader's `links`."""
    base, _, token = links.feedback.rpartition("/feedback/")
    return f"{base}/welcome/{token}"


def interest_name(keywords: Sequence[str], description: str, limit: int = NAME_CHARS) -> str:
    """A name for an interest made from its own words: its first keywords, else phrases of its sentence (the first,
    then the most distinctive of the rest: the largest summed rarity of its words in the shipped background
    statistics), in the sentence's order, up to `limit` characters; never a placeholder. "" when the words give
    nothing to name it by."""
    if keywords:
        parts = list(keywords)
    else:
        found = chunks(description)
        idf = background().idf()
        rarity = [sum(float(idf[c]) for c in chunk.cols[:len(chunk.words)])
                  for chunk in found]
        # its first phrase (what a reader names first is what the sentence is about), then the rarest of the rest
        best = [0, *sorted(range(1, len(found)), key=lambda n: (-rarity[n], n))[:NAME_PHRASES - 1]][:len(found)]
        parts = [description[found[n].spans[0][0]:found[n].spans[-1][1]] for n in sorted(best)]
    name = ""
    for part in parts:
        part = " ".join(part.split())
        joined = f"{name}, {part}" if name else part
        if len(joined) > limit:
            break
        name = joined
    if not name and parts:
        name = " ".join(parts[0].split())[: limit - 1].rstrip() + "…"
    return name[:1].upper() + name[1:] if name[:2].islower() else name  # (not "vLLM" → "VLLM")


def own_interest(text: str, keywords: str = "") -> tuple[Interest | None, list[str]]:
    """The interest a reader wrote in their own words: the sentence as its description, the keywords field's
    words (separated by commas, semicolons or lines) as its keywords, named from its words (`interest_name`)."""
    text, keywords = text.strip(), keywords.strip()
    if not text and not keywords:
        return None, []
    if len(text) > MAX_WORDS_TEXT or len(keywords) > MAX_WORDS_TEXT:
        return None, [f"Your interests are {max(len(text), len(keywords))} characters long: keep them under "
                      f"{MAX_WORDS_TEXT}."]
    parts = [" ".join(p.split()) for p in keywords.replace(";", ",").replace("\n", ",").split(",")]
    parts = [p for p in parts if p]
    if len(parts) > MAX_KEYWORDS or any(len(p) > MAX_KEYWORD for p in parts):
        return None, [f"Give at most {MAX_KEYWORDS} keywords of at most {MAX_KEYWORD} characters each."]
    table: dict[str, Any] = {"name": interest_name(parts, text) or OWN_INTEREST}
    if parts:
        table["keywords"] = parts
    if text:
        table["description"] = text
    interest, problems = check_interest(table, 0)
    return interest, [p.removeprefix("interest 1: ") for p in problems]


def form_library(form: Form) -> tuple[Library | None, list[str]]:
    """The library a form carried, read (its unusable entries listed in `problems`), or the sentence that says why
    it could not be; (None, []) without one."""
    if form.library is None:
        return None, []
    try:
        library = read_upload(*form.library)
    except LibraryError as exc:
        return None, [f"Your library could not be read ({exc}). Nothing was taken from it: fix or export it again, "
                      "and choose the file again."]
    if not library.entries:
        return None, [f"Your library ({library.path}) has no paper we could read: each needs a title, an arXiv id "
                      "or a DOI."]
    return library, []


class Signups:
    """The signup room over a command's parts (its store, signer, renderer, settings and transport)."""

    def __init__(self, app: Parts, frequencies: Mapping[str, str]) -> None:
        self.app = app
        self.settings = app.config.signup
        self.frequencies = dict(frequencies)  # value → label, the choices the form offers

    # -- keys and hashes --------------------------------------------------------------------------------

    @cached_property
    def _key(self) -> bytes:
        return hashlib.sha256(b"paper-digest.signup\0" + self.app.signer.secret.encode()).digest()

    def keyed(self, kind: str, text: str) -> str:
        """A keyed hash of `text` (an IP address, an email address): comparable, not reversible."""
        return hmac.new(self._key, f"{kind}\0{text}".encode(), "sha256").hexdigest()[:40]

    def form_token(self, cookie: str) -> str:
        """The CSRF token a form carries for the browser holding `cookie` (a double-submit, keyed by the secret,
        so every `digest serve` process on the store accepts it)."""
        return self.keyed("csrf", cookie)

    def form_version(self) -> str:
        """The version of the form's wording: the first 12 hex digits of the SHA-256 of the template in use."""
        environment = self.app.renderer.environment
        source, _, _ = environment.loader.get_source(environment, FORM)  # type: ignore[union-attr]
        return hashlib.sha256(source.encode()).hexdigest()[:12]

    # -- the form -------------------------------------------------------------------------------------------

    def check(self, form: Form, library: Library | None = None, trouble: Sequence[str] = ()) -> Subscriber:
        """The profile a form asks for (with an interest of the `library` read from it); Invalid with every mistake
        in it (`trouble`: the library's)."""
        problems = list(trouble)
        if not is_email(form.email):
            problems.append("Enter your email address, like ada@example.org.")
        name = " ".join(form.name.split())
        if len(name) > MAX_NAME or not name.isprintable():
            problems.append(f"Your name must be one line of at most {MAX_NAME} characters.")
        topics, unknown = chosen(self.app.config.topics, form.topics)
        if unknown:
            problems.append("Pick topics from the list only.")
        own, trouble = own_interest(form.words, form.keywords)
        problems += trouble
        if form.timezone not in zones():
            problems.append("Choose a time zone from the list, like Europe/London or America/New_York.")
        if form.frequency not in self.frequencies:
            problems.append("Choose how often from the list.")
        if problems:
            raise Invalid(problems)
        interests = tuple(t.interest for t in topics) + ((own,) if own else ())
        interests += (library_interest(LIBRARY_INTEREST, library),) if library else ()
        return Subscriber(email=form.email, name=name, timezone=form.timezone, send_at=SEND_AT,
                          frequency=form.frequency, max_papers=MAX_PAPERS, interests=interests)

    def limit(self, kind: str, who: str) -> None:
        """Count one signup by `who` (an IP address, or an email address); Refused 429 past the setting."""
        if kind == "ip":
            period, most = HOUR, self.settings.per_ip_hour
            heading, text = ("Too many signups from your network",
                             "Please wait an hour and try again.")
            who = network(who)
        else:
            period, most = DAY, self.settings.per_address_day
            heading, text = ("Too many signups for this address",
                             "Please check your inbox (and spam folder) for the emails already sent, or try "
                             "again tomorrow.")
        if self.app.store.hit(f"signup-{kind}:{self.keyed(kind, who.lower())}", period) > most:
            raise Refused(429, heading, text, retry_after=period)

    def request(self, form: Form, ip: str) -> Library | None:
        """A form sent from `ip`: check it, count it, and send a confirmation email (and nothing else); the library
        it carried, as read (kept with the signup, and the subscriber's once confirmed).

        Returns the same way whatever the address (new, pending, subscribed, a profile file's), so the page
        that follows cannot tell them apart; Invalid or Refused otherwise.
        """
        self.limit("ip", ip)
        if form.honeypot:
            log.info("signup: a form with the hidden field filled in (a bot) was ignored")
            return None
        library, trouble = form_library(form)
        subscriber = self.check(form, library, trouble)
        libraries = {i.library_key: i.library for i in subscriber.interests if i.library}
        self.limit("address", subscriber.email)
        nonce = secrets.token_hex(16)
        record = SignupRecord(email=subscriber.email, status="pending", nonce=nonce,
                              profile=profile_json(subscriber), requested_at=_now(),
                              form_version=self.form_version(), ip_hash=self.keyed("ip", ip), detail="")
        self.sync()
        source, path = self.app.store.owners([subscriber.email.lower()]).get(subscriber.email.lower(), ("", None))
        if source in ("file", "import"):
            holder = f"the profile file {path}" if source == "file" else "an imported subscriber"
            log.warning("signup: %s has signed up on the web page, but %s has the address: nothing was sent and "
                        "the profile is unchanged (one address, one source)", subscriber.email, holder)
            self.app.store.put_signup(replace(record, status="held", detail=holder),
                                      expired_before=expiry(self.settings.confirm_hours), libraries=libraries)
            return library
        blocked = self.app.store.suppressed_among([subscriber.email]).get(subscriber.email.lower())
        if blocked and blocked != "unsubscribed":
            log.warning("signup: %s is suppressed (%s): no confirmation sent", subscriber.email, blocked)
            return library
        self.app.store.put_signup(record, expired_before=expiry(self.settings.confirm_hours), libraries=libraries)
        self._send("confirm", subscriber, {
            "confirm_url": f"{self.app.newsletter.base_url}/confirm/{self.make_link(subscriber.email, nonce)}",
            "hours": self.settings.confirm_hours})
        return library

    def sync(self) -> None:
        """Bring changed profile files into the store first, so that a file's address is known to be the file's
        (only files whose size or time stamp changed are read; their problems are the operator's pages' business)."""
        roster.sync(self.app.store, Path(self.app.config.subscribers.dir))

    # -- the link -------------------------------------------------------------------------------------------

    def make_link(self, email: str, nonce: str, *, issued: datetime | None = None) -> str:
        """The token of a confirmation link (`issued`: now)."""
        seconds = int((issued or datetime.now(UTC)).timestamp())
        return self.app.signer.seal(_PURPOSE, seconds.to_bytes(5, "big") + bytes.fromhex(nonce) + email.encode())

    def link(self, token: str) -> Link:
        """What a confirmation link says; Refused 400 (forged, altered, cut short) or 410 (expired)."""
        try:
            plain = self.app.signer.unseal(_PURPOSE, token)
            issued = datetime.fromtimestamp(int.from_bytes(plain[:5], "big"), UTC)
            found = Link(plain[21:].decode(), plain[5:21].hex(), issued)
            if not is_email(found.email):
                raise ValueError("no address in the link")
        except (BadToken, ValueError, OverflowError, OSError) as exc:
            raise Refused(400, "This link is not valid", "It may have been cut short or changed. Use the link "
                                                         "in the email, or sign up again.") from exc
        if (datetime.now(UTC) - issued).total_seconds() > self.settings.confirm_hours * HOUR:
            raise Refused(410, "This link has expired", f"Confirmation links work for {self.settings.confirm_hours} "
                                                        "hours. Please sign up again.")
        return found

    def pending(self, link: Link) -> Subscriber:
        """The profile a link's signup asks for (for the page with the button); Refused 410 when there is none."""
        record = self.app.store.signup(link.email)
        if record is None or record.nonce != link.nonce or record.status != "pending":
            raise self._gone(link)
        return subscriber_of(record.profile, None)

    def _gone(self, link: Link) -> Refused:
        if any(c["nonce"] == link.nonce for c in self.app.store.consents_of(link.email)):
            found = self.app.store.profile_of(link.email)
            if found is not None and found[0] == "web" and not self.app.store.suppressed_among([link.email]):
                return Confirmed(found[1], self.app.links(found[1].email))
            return Refused(410, "This link has already been used", "Your subscription is confirmed. Each email "
                                                                   "you get has a link to change your preferences.")
        return Refused(410, "This link is no longer valid", "A newer confirmation email replaced it, or the signup "
                                                            "was withdrawn. Use the latest email, or sign up again.")

    def confirm(self, link: Link, ip: str) -> Welcome:
        """The button pressed: the subscription starts (see `Store.confirm_signup`), then the welcome email."""
        self.sync()
        done = self.app.store.confirm_signup(link.email, link.nonce, self.keyed("ip", ip))
        if done.outcome in ("used", "void"):
            raise self._gone(link)
        if done.outcome == "held" or done.subscriber is None:
            log.warning("signup: %s confirmed, but %s has the address meanwhile: the profile is unchanged",
                        link.email, done.holder)
            raise Refused(409, "You are already subscribed", "This address gets the digest through the newsletter's "
                                                              "operator, who keeps its settings. Reply to any digest "
                                                              "to change them.")
        subscriber = done.subscriber
        links = self.app.links(subscriber.email)
        welcome = Welcome(subscriber, done.outcome == "updated", self._preview(subscriber), links)
        if not welcome.updated:
            try:
                self._send("welcome", subscriber, {"links": links, "rate_url": rating_url(links)})
            except Refused as exc:  # subscribed all the same; the page says so
                welcome.problems.append(exc.text)
        log.info("signup: %s %s their subscription", subscriber.email, "updated" if welcome.updated else "confirmed")
        return welcome

    def _preview(self, subscriber: Subscriber) -> Composed | None:
        """Their digest as it would be sent today (the operator's preview: select, render, mail)."""
        try:
            today = date.today()
            return self.app.composer.compose(subscriber, today, self.app.composer.pool(today))
        except Exception:  # noqa: BLE001 - the welcome page goes on without it
            log.exception("signup: could not compose the first digest of %s", subscriber.email)
            return None

    # -- emails ---------------------------------------------------------------------------------------------

    def _send(self, kind: str, subscriber: Subscriber, context: dict[str, Any]) -> None:
        """Build and send the `kind` email (confirm, welcome); Refused 503 when it could not go."""
        transport: Transport | None = None
        try:
            message = self.message(kind, subscriber, context)  # ValueError: an address no header can carry
            transport = self._transport(kind)
            _, error = hand_over(transport, self.app.mailer.wire(message), subscriber.email, date.today(),
                                 RetryPolicy(attempts=2, delay=0.5, breaker=0))
        except (DigestError, ValueError) as exc:
            error = exc
        finally:
            if transport is not None:
                transport.close()
        if error is not None:
            log.error("signup: the %s email to %s could not be sent: %s", kind, subscriber.email, error)
            raise Refused(503, "We could not send the email", "Something went wrong on our side. Please try again "
                                                              "in a few minutes.", retry_after=300)

    def _transport(self, kind: str) -> Transport:
        config = self.app.config
        if config.delivery.transport == "smtp":
            return make_transport(config, os.environ)
        return OutboxTransport(Path(config.delivery.outbox) / kind)  # beside, never over, a digest's file

    def message(self, kind: str, subscriber: Subscriber, context: dict[str, Any]) -> EmailMessage:
        """The `kind` email to `subscriber` from templates/signup-<kind>.{txt,html}.j2."""
        newsletter = self.app.newsletter
        context = {"newsletter": newsletter, "subscriber": subscriber, "frequency": self.describe(subscriber),
                   **context}
        render = self.app.renderer.render_template
        subject = one_line(render(f"signup-{kind}.subject.j2", context))
        msg = EmailMessage(policy=SMTP)
        msg["From"] = Address(one_line(newsletter.name), addr_spec=newsletter.from_address)
        msg["To"] = _recipient(subscriber)
        if newsletter.reply_to:
            msg["Reply-To"] = newsletter.reply_to
        msg["Subject"] = subject
        msg["Date"] = format_datetime(datetime.now(UTC))
        msg["Message-ID"] = make_msgid(f"signup-{kind}", newsletter.from_address.rpartition("@")[2])
        msg["Auto-Submitted"] = "auto-generated"
        msg.set_content(render(f"signup-{kind}.txt.j2", context))
        msg.add_alternative(render(f"signup-{kind}.html.j2", context), subtype="html")
        return msg

    def describe(self, subscriber: Subscriber) -> str:
        """When the digest comes, in words: "every day at 07:00 (Europe/London)"."""
        label = self.frequencies.get(subscriber.frequency, subscriber.frequency).lower()
        return f"{label} at {subscriber.send_at:%H:%M} ({subscriber.timezone})"


def _recipient(subscriber: Subscriber) -> Address:
    """The To address, built from the address's two parts; a name that could pass for an address (or an encoded
    word) is left out."""
    user, domain = mailbox_parts(subscriber.email)
    name = one_line(subscriber.name)
    if any(c in name for c in "@<>") or "=?" in name:
        name = ""
    return Address(display_name=name, username=user, domain=domain)


def network(ip: str) -> str:
    """The rate limit's unit: an IPv4 address, or an IPv6 address's /64 (one host often has the whole /64)."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if address.version == 6 and address.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address.ipv4_mapped or address) if address.version == 6 else str(address)


@lru_cache(maxsize=1)
def zones() -> frozenset[str]:
    """The IANA time zones this system knows (read once)."""
    return frozenset(available_timezones())


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
