"""Is this install ready for real readers? The checks of `digest check`, and the gate every SMTP send passes.

A `Finding` names the setting, what is wrong and the fix. Those that `stops_smtp` are the sample's
identity left in place (a From, Reply-To or return path on a reserved example domain, the sample's
base_url or postal address, or a base_url on this machine): a send over SMTP stops on them unless
the operator says it is a lab (`--allow-placeholder`). The others (no link-signing secret in the
environment, no DKIM, a base_url the configured `digest serve` would not answer, no `[[sources]]`, so
that every digest is made of the same sample pages) are reported by `digest check`, and the secret
and the sources also warned of when a send over SMTP starts. The DNS records the From domain
needs (SPF, DMARC, DKIM) are printed to publish, never looked up: the check makes no network call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from digest.config import Config, is_loopback_host
from digest.errors import ConfigError, DigestError

# RFC 2606 and RFC 6761: names that are never anyone's, so mail from them is junk and links to them go nowhere.
EXAMPLE_DOMAINS = ("example.org", "example.com", "example.net")
RESERVED_TLDS = ("example", "test", "invalid", "localhost")
SAMPLE_STREET = "example street"  # the sample footer's "1 Example Street, Example City"
SERVE_HOST, SERVE_PORT = "127.0.0.1", 8025  # `digest serve`'s defaults (no setting records how it is started)
WILDCARDS = ("", "0.0.0.0", "::")
ALLOW_ENV = "DIGEST_ALLOW_PLACEHOLDER"  # =1: --allow-placeholder for every command (a lab, a test suite)
TXT_STRING = 255  # RFC 1035: one character-string of a TXT record holds at most 255 bytes


@dataclass(frozen=True)
class Finding:
    """One thing not ready for real readers: the setting, what is wrong, and what to do."""

    setting: str
    problem: str
    fix: str
    stops_smtp: bool = False  # the sample's identity: an SMTP send stops on it without --allow-placeholder

    def line(self) -> str:
        return f"{self.setting}: {self.problem}; fix: {self.fix}"


@dataclass(frozen=True)
class Serve:
    """How `digest serve` is started (its --host and --port): assumed, since no setting records it."""

    host: str = SERVE_HOST
    port: int = SERVE_PORT


def is_placeholder_domain(domain: str) -> bool:
    """Whether a domain is a reserved example or test name (example.org, x.example.com, y.test …)."""
    name = domain.lower().rstrip(".")
    return any(name == d or name.endswith("." + d) for d in EXAMPLE_DOMAINS) or name.rpartition(".")[2] in RESERVED_TLDS


def _domain(address: str) -> str:
    return address.rpartition("@")[2]


ADDRESSES = (("newsletter", "from_address"), ("newsletter", "reply_to"), ("newsletter", "unsubscribe_mailto"),
             ("delivery", "return_path"))


def identity(config: Config) -> list[Finding]:
    """The sample's identity still in place: every one of these stops an SMTP send."""
    found = []
    for section, key in ADDRESSES:
        address = getattr(getattr(config, section), key)
        if address and is_placeholder_domain(_domain(address)):
            found.append(Finding(f"{section}.{key}", f"{address} is a placeholder on a reserved example domain "
                                 "(receivers reject or junk its mail, and replies and reports go nowhere)",
                                 f"set [{section}] {key} to an address on a domain you control", stops_smtp=True))
    n = config.newsletter
    host = urlsplit(n.base_url).hostname or ""
    if is_placeholder_domain(host):
        found.append(Finding("newsletter.base_url", f"{n.base_url} is a placeholder: every unsubscribe, preferences "
                             "and feedback link (and List-Unsubscribe) would point at it",
                             "set [newsletter] base_url to the public https URL your TLS proxy serves "
                             "`digest serve` at", stops_smtp=True))
    elif is_loopback_host(host):
        found.append(Finding("newsletter.base_url", f"{n.base_url} is this machine: fine for a local trial, but "
                             "readers' unsubscribe and preferences links would not open",
                             "set [newsletter] base_url to the public https URL your TLS proxy serves "
                             "`digest serve` at", stops_smtp=True))
    if SAMPLE_STREET in n.postal_address.lower():
        found.append(Finding("newsletter.postal_address", f"{n.postal_address!r} is the sample's address (the "
                             "footer of every digest shows it; CAN-SPAM requires a real one)",
                             "set [newsletter] postal_address to your postal address", stops_smtp=True))
    return found


def secret(config: Config, environ: Mapping[str, str]) -> list[Finding]:
    """The key that signs link tokens: from the environment, not the database (see `app.App`)."""
    name = config.newsletter.secret_env
    if environ.get(name):
        return []
    return [Finding("newsletter.secret_env", f"${name} is not set, so link tokens are signed with a key kept in "
                    "the database: a restored backup or a new database voids every link already mailed",
                    f"set ${name} in the environment of every `digest` command and `digest serve`, before the "
                    f"first real send (say, {name}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))'))"
                    )]


def dkim(config: Config, environ: Mapping[str, str]) -> list[Finding]:
    """A signature, or the operator's word that the relay signs; a set selector whose key cannot be read."""
    d = config.dkim
    if not d.selector:
        if d.relay_signs:
            return []
        return [Finding("dkim.selector", "empty, and dkim.relay_signs is false: Gmail and Yahoo require bulk "
                        "senders to sign their mail, and reject or junk unsigned digests",
                        "make a key and set dkim.selector (docs/delivery.md, section \"DKIM\"), or set "
                        "dkim.relay_signs = true "
                        "when your relay signs")]
    from digest.delivery.dkim import DkimSigner  # OpenSSL loads only when a key is to be read

    try:
        DkimSigner.from_config(config, environ)
    except DigestError as exc:
        return [Finding("dkim.selector", f"set, but its key cannot be used ({exc})",
                        "fix dkim.key_file or $" + d.key_env + " as the message says "
                        "(docs/delivery.md, section \"DKIM\")")]
    return []


def served(config: Config, serve: Serve) -> list[Finding]:
    """A base_url that `digest serve`, started as `serve` says, would not answer, as far as that can be known."""
    base = urlsplit(config.newsletter.base_url)
    found = []
    if base.query or base.fragment:
        found.append(Finding("newsletter.base_url", "has a query or fragment: links are made by adding a path to "
                             "it, so every link would be broken", "remove the part from '?' or '#' on"))
    host = base.hostname or ""
    if not is_loopback_host(host):
        if base.port == serve.port and not _loopback(serve.host):
            found.append(Finding("newsletter.base_url", f"names https on port {serve.port}, where `digest serve` "
                                 "itself listens, but `digest serve` speaks plain HTTP",
                                 "put a TLS proxy in front of it and name the proxy's port (or none, for 443)"))
        return found
    scheme_port = 443 if base.scheme == "https" else 80
    port = base.port or scheme_port
    if base.scheme == "https":
        found.append(Finding("newsletter.base_url", f"{config.newsletter.base_url} asks for TLS on this machine, "
                             "which `digest serve` does not speak",
                             f"for a local trial use http://{url_host(host)}:{serve.port}"))
    elif port != serve.port:
        found.append(Finding("newsletter.base_url", f"names port {port}, but `digest serve` listens on {serve.port}",
                             f"start it with `digest serve --port {port}` (and check with `digest check --port "
                             f"{port}`), or name port {serve.port} in base_url"))
    if not (serve.host in WILDCARDS or _same_loopback(host, serve.host)):
        found.append(Finding("newsletter.base_url", f"names {host}, but `digest serve` listens on {serve.host}",
                             f"start it with `digest serve --host {host}`, or name {serve.host} in base_url"))
    return found


def _loopback(host: str) -> bool:
    return is_loopback_host(host.strip("[]"))


def _same_loopback(url_host: str, bind: str) -> bool:
    """Whether a server bound to loopback address `bind` answers a URL naming `url_host` (localhost: 127.0.0.1)."""
    bind = bind.strip("[]").lower()
    if url_host.lower().rstrip(".") == "localhost":
        return bind in ("localhost", "127.0.0.1", "::1")
    return url_host.lower() == bind or (bind == "localhost" and url_host == "127.0.0.1")


def url_host(host: str) -> str:
    """A host as a URL names it (`::1` → `[::1]`)."""
    return f"[{host}]" if ":" in host else host


def assumptions(config: Config, serve: Serve) -> list[str]:
    """What the base_url check had to assume about how `digest serve` is reached."""
    base = urlsplit(config.newsletter.base_url)
    started = f"`digest serve --host {serve.host} --port {serve.port}`"
    if is_loopback_host(base.hostname or ""):
        return [f"`digest serve` is started as {started} on this machine (name another with --host/--port)"]
    path = base.path.rstrip("/") or "/"
    return [f"a TLS proxy answers {base.scheme}://{base.netloc} and forwards to {started}, keeping the path "
            f"{path} (the public pages answer under it) and the Host header (or setting it to {serve.host})"]


def dns_records(config: Config, environ: Mapping[str, str] | None = None) -> list[str]:
    """The records to publish so receivers trust the From domain: SPF for the envelope sender's domain, DMARC,
    and DKIM's when a selector is set, with the public half of its key when the key can be read (`environ` holds
    dkim.key_env). What cannot be known here is a placeholder in <>; no lookup is made."""
    from_domain = _domain(config.newsletter.from_address)
    envelope = _domain(config.delivery.return_path) if config.delivery.return_path else from_domain
    relay = config.smtp.host
    sender = ("ip4:<this machine's public IPv4 address>" if is_loopback_host(relay) or relay == "localhost"
              else f"a:{relay}")
    records = [f'{envelope} TXT "v=spf1 {sender} ~all"   (SPF; an email provider gives an include: to use instead)',
               f'_dmarc.{from_domain} TXT "v=DMARC1; p=none; rua=mailto:dmarc-reports@{from_domain}"   (DMARC; '
               'p=quarantine once the reports show every digest passes)']
    d = config.dkim
    domain = d.domain or from_domain
    keys = _public_keys(config, environ or {})
    if d.selector:
        kind = "ed25519" if d.algorithm == "ed25519-sha256" else "rsa"
        records.append(_dkim_record(f"{d.selector}._domainkey.{domain}", kind, keys.get(d.selector)))
    if d.ed25519_selector:
        records.append(_dkim_record(f"{d.ed25519_selector}._domainkey.{domain}", "ed25519",
                                    keys.get(d.ed25519_selector)))
    return records


def _public_keys(config: Config, environ: Mapping[str, str]) -> dict[str, str]:
    """Each DKIM selector's p= value, from the keys a send would sign with; none when they cannot be read (the
    check's dkim finding says why)."""
    from digest.delivery.dkim import DkimSigner

    try:
        signer = DkimSigner.from_config(config, environ)
    except DigestError:
        return {}
    return {s.selector: s.key.dns_value() for s in signer.signatures} if signer else {}


def _dkim_record(name: str, kind: str, key: str | None) -> str:
    """The DKIM record as a zone file writes it. A 2048-bit RSA key runs past one string's 255 bytes, so the value
    is split into quoted strings, which receivers join (RFC 6376 3.6.2.2)."""
    if key is None:
        return f'{name} TXT "v=DKIM1; k={kind}; p=<the public key>"   (DKIM; docs/delivery.md, section "DKIM", ' \
            'shows how ' \
               "to print the key)"
    value = f"v=DKIM1; k={kind}; p={key}"
    strings = [value[i:i + TXT_STRING] for i in range(0, len(value), TXT_STRING)]
    note = "(DKIM: the public half of its key"
    if len(strings) > 1:
        note += "; where your DNS host asks for one value, give it the strings joined, without the quotes"
    quoted = " ".join('"' + part + '"' for part in strings)
    return f"{name} TXT {quoted}   {note})"


def sources(config: Config) -> list[Finding]:
    """No live source: every run reads `[ingest] paths` again (as shipped, the sample pages), so the digests are
    made of the same papers day after day."""
    if config.sources:
        return []
    paths = ", ".join(map(str, config.ingest.paths)) or "none"
    return [Finding("sources", f"no [[sources]] configured: `digest run` and `digest fetch` read only [ingest] paths "
                    f"({paths}), the same files every time (as shipped, the sample pages), so no new paper arrives "
                    "and every digest keeps coming from them", "add the feeds to follow as [[sources]] tables "
                    "(docs/configuration.md, section \"Sources\")")]


GITHUB_ANONYMOUS = 60  # requests an hour GitHub's API allows an address without a token


def signals(config: Config, environ: Mapping[str, str]) -> list[Finding]:
    """GitHub's stars asked without a token, more a day than GitHub answers an address in an hour: past the 60th
    request GitHub refuses them (403) and the rest of the day's repositories keep the stars they had."""
    settings = config.signals
    if not settings.github or settings.github_budget <= GITHUB_ANONYMOUS:
        return []
    if settings.github_token_env and environ.get(settings.github_token_env):
        return []
    where = f"${settings.github_token_env}" if settings.github_token_env else "no signals.github_token_env"
    return [Finding("signals.github", f"asks GitHub for up to {settings.github_budget} repositories a day with no "
                    f"token ({where} is empty): GitHub answers {GITHUB_ANONYMOUS} requests an hour without one, so "
                    "the rest fail that day", f"put a GitHub token in ${settings.github_token_env or 'GITHUB_TOKEN'} "
                    f"(and signals.github_token_env), or lower signals.github_budget to {GITHUB_ANONYMOUS}")]


def readers(store: Any) -> list[Finding]:
    """The sample's readers (reserved example domains) still among the subscribers: their digests go nowhere."""
    count, first = store.subscribers_on([*EXAMPLE_DOMAINS, *RESERVED_TLDS])
    if not count:
        return []
    total = store.count_subscribers()
    return [Finding("subscribers", f"{count} of {total} subscribers are on reserved example domains "
                    f"({', '.join(first)}{', …' if count > len(first) else ''}): the sample's readers, whose digests "
                    "go nowhere", "take the sample profiles out of subscribers.dir (`digest subscribers remove "
                    "EMAIL` for imported ones) and add your readers")]


def check(config: Config, environ: Mapping[str, str], serve: Serve) -> list[Finding]:
    """Everything not ready for real readers, the identity first."""
    return [*identity(config), *secret(config, environ), *dkim(config, environ), *served(config, serve),
            *sources(config), *signals(config, environ)]


def smtp_gate(config: Config, environ: Mapping[str, str], *, allow_placeholder: bool,
              what: str = "this SMTP send") -> list[str]:
    """Checked when a send over SMTP starts: a placeholder identity stops it (ConfigError, exit 2) unless
    `allow_placeholder` (a lab, which is warned of nothing more); with a real identity, what else is certain
    without `digest serve`'s flags (the secret, the sources) comes back as warnings: real readers would get the
    sample's papers, but that is the operator's to fix, not a reason to send nothing."""
    stops = identity(config)
    if stops and not allow_placeholder:
        names = ", ".join(dict.fromkeys(f.setting for f in stops))
        raise ConfigError(f"{config.source or 'settings'}: {what} would go out under a placeholder identity "
                          f"({names}); set your own in [newsletter] (`digest check` lists each fix), or pass "
                          f"--allow-placeholder (${ALLOW_ENV}=1) for a lab")
    if stops:
        return []
    return [f"not ready for real readers: {f.line()}" for f in (*secret(config, environ), *sources(config))]


def summary(findings: list[Finding]) -> str:
    """The last line of `digest check`."""
    if not findings:
        return "ready for real readers"
    stops = sum(f.stops_smtp for f in findings)
    return (f"{len(findings)} to fix before real readers ({stops} would stop a send over SMTP); run `digest check` "
            "again after each fix")


def transport_note(config: Any) -> str | None:
    """The last step of going live, when it is not taken yet."""
    if config.delivery.transport == "smtp":
        return None
    return ('delivery.transport is "outbox": digests are written to files; set it to "smtp" (and [smtp]) once '
            "this check is clean")
