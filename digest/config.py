"""Settings: declared once as a table, read from `digest.toml`, validated at start."""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from digest.errors import ConfigError
from digest.models import Newsletter
from digest.sources.live import KINDS, SourceSpec
from digest.subscribers.addresses import ENCODED_WORD
from digest.subscribers.topics import Topic, read_topics

CONFIG_ENV = "DIGEST_CONFIG"
DEFAULT_FILE = "digest.toml"


@dataclass(frozen=True)
class Setting:
    """One declared setting: where it lives, its type, its default and what it does."""

    section: str
    key: str
    type: type | tuple[type, ...]
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    path: bool = False  # resolved relative to the config file's folder
    minimum: float | None = None  # numbers below it are rejected
    maximum: float | None = None  # numbers above it are rejected
    check: str = ""  # a further check of the value: "email", "url", "timezone", "cron" (see CHECKS)

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"


SETTINGS: tuple[Setting, ...] = (
    Setting("store", "url", str, "sqlite:///digest.db",
            "Database URL (SQLAlchemy). A relative SQLite path is relative to the config file.", check="database"),
    Setting("store", "durable_sends", bool, False,
            "Flush every digest's `sent` mark to disk before the next digest goes (SQLite synchronous=FULL, "
            "PostgreSQL synchronous_commit on for the send log). Off, a killed process still loses nothing; a power "
            "cut, or a crash of the machine or the PostgreSQL server, can forget the marks of the last moments, and "
            "those digests are sent once more (see docs/delivery.md, \"Crash safety\")."),
    Setting("ingest", "paths", list, ["seeds"],
            "Files or folders `digest ingest` and `digest run` read when given no paths.", path=True),
    Setting("subscribers", "dir", str, "subscribers", "Folder of subscriber profiles (`*.toml`).", path=True),
    Setting("delivery", "transport", str, "outbox",
            "Where digests go: `outbox` (files) or `smtp` (the server in `[smtp]`).", choices=("outbox", "smtp")),
    Setting("delivery", "outbox", str, "outbox",
            "Folder the outbox transport writes `<date>/<subscriber>.eml` files into.", path=True),
    Setting("delivery", "attempts", int, 3,
            "Tries per digest within one run when the server answers 4xx or the connection drops; "
            "after the last one the digest stays pending for the next run.", minimum=1, maximum=100),
    Setting("delivery", "retry_delay", (int, float), 2.0,
            "Seconds before the first retry; each further retry waits twice as long.", minimum=0, maximum=3600),
    Setting("delivery", "batch_size", int, 100,
            "Digests a send run or worker claims at a time (their ranking is shared; a killed worker's batch is "
            "taken over by the next run).", minimum=1, maximum=100_000),
    Setting("delivery", "workers", int, 1,
            "Processes a send run delivers with (`--workers` overrides it); each claims its own batches. "
            "smtp.max_per_second and max_per_hour are shared out between them.", minimum=1, maximum=256),
    Setting("delivery", "lease_seconds", int, 600,
            "How long a claim on a digest holds before another worker may take it over (a worker renews it while "
            "it lives; a dead process on the same machine is taken over at once).", minimum=30, maximum=86400 * 7),
    Setting("delivery", "max_connection_failures", int, 3,
            "Tries in a row whose connection broke or stalled (no reply within smtp.deadline) after which the run "
            "stops, leaving the rest queued for the next run, and exits 1 (0: never stop for this).", minimum=0,
            maximum=1000),
    Setting("delivery", "max_run_minutes", (int, float), 1440,
            "A send run stops claiming digests after this long, leaves the rest queued for the next run and "
            "exits 1 (0: no limit).", minimum=0, maximum=10080),
    Setting("delivery", "suppress_after", int, 1,
            "Hard bounces (5xx for the address) in a row after which the address is suppressed.", minimum=1,
            maximum=1000),
    Setting("delivery", "return_path", str, "",
            "Envelope sender (Return-Path) of the digests, tagged per message as `local+TAG@domain` (VERP) so that "
            "a bounce names its digest: the mailbox `digest bounces` reads, which must take `local+anything` "
            "(Postfix: `recipient_delimiter = +`). Empty: newsletter.from_address, untagged.", check="email"),
    Setting("bounces", "soft_limit", int, 3,
            "Soft bounces (mailbox full, delayed, 4.x.x) of this many digests within bounces.soft_window_days "
            "suppress an address; a hard bounce (5.1.1 …) suppresses it at once.", minimum=1, maximum=1000),
    Setting("bounces", "soft_window_days", int, 14,
            "Days over which soft bounces are counted (the window ends at each report's date).", minimum=1,
            maximum=365),
    Setting("bounces", "imap_password_env", str, "DIGEST_IMAP_PASSWORD",
            "Environment variable holding the password of `digest bounces --imap` (never in the URL or a file)."),
    Setting("webhooks", "mailgun_env", str, "DIGEST_MAILGUN_SIGNING_KEY",
            "Environment variable holding Mailgun's HTTP webhook signing key; set, `digest serve` answers `POST "
            "/webhooks/mailgun` (unset: 404)."),
    Setting("webhooks", "postmark_env", str, "DIGEST_POSTMARK_WEBHOOK_PASSWORD",
            "Environment variable holding the basic-auth password written in Postmark's bounce and spam-complaint "
            "webhook URL; set, `digest serve` answers `POST /webhooks/postmark` (unset: 404)."),
    Setting("webhooks", "sendgrid_env", str, "DIGEST_SENDGRID_VERIFICATION_KEY",
            "Environment variable holding SendGrid's signed event webhook verification key (base64, as its "
            "settings page shows it); set, `digest serve` answers `POST /webhooks/sendgrid` (unset: 404)."),
    Setting("webhooks", "resend_env", str, "DIGEST_RESEND_WEBHOOK_SECRET",
            "Environment variable holding Resend's webhook signing secret (`whsec_…`); set, `digest serve` "
            "answers `POST /webhooks/resend` (unset: 404)."),
    Setting("webhooks", "ses_topics", list, [],
            "Amazon SNS topic ARNs whose SES bounce and complaint notifications `POST /webhooks/ses` accepts (the "
            "message's SNS signature checked against SNS's certificate); empty: 404."),
    Setting("smtp", "host", str, "localhost", "SMTP server (relay or submission server).", check="host"),
    Setting("smtp", "port", int, 587, "SMTP port: 587 for starttls, 465 for ssl, 25 between servers.", minimum=1,
            maximum=65535),
    Setting("smtp", "security", str, "starttls",
            "`starttls` (upgrade, never fall back to plain text), `ssl` (TLS from the start) or `none`.",
            choices=("starttls", "ssl", "none")),
    Setting("smtp", "username", str, "", "Login for SMTP AUTH (empty: no AUTH). Needs starttls or ssl."),
    Setting("smtp", "password_env", str, "DIGEST_SMTP_PASSWORD",
            "Environment variable holding the SMTP password (never read from a file)."),
    Setting("smtp", "ca_file", str, "",
            "PEM file of the certificate authorities to trust, for a private relay (empty: the system's).",
            path=True),
    Setting("smtp", "verify_certificate", bool, True,
            "Check the server's certificate and host name. Only an explicit `false` turns this off."),
    Setting("smtp", "timeout", (int, float), 30.0,
            "Seconds to wait for the server at each step, but the reply to the end of a message: that one gets "
            "RFC 5321's 10 minutes, within smtp.deadline.", minimum=0.1, maximum=3600),
    Setting("smtp", "deadline", (int, float), 120.0,
            "Seconds one message may take in all, from connecting to the server's last reply: a server that "
            "stalls or answers a byte at a time is cut off (the try counts as a broken connection). 600 or more "
            "gives a server that scans each message before it answers RFC 5321's full 10 minutes.",
            minimum=1, maximum=86400),
    Setting("smtp", "max_per_second", (int, float), 0, "At most this many messages a second (0: no limit).",
            minimum=0),
    Setting("smtp", "max_per_hour", int, 0, "At most this many messages an hour (0: no limit).", minimum=0),
    Setting("smtp", "messages_per_connection", int, 100,
            "Open a new connection after this many messages (0: keep it while the server does).", minimum=0,
            maximum=1_000_000),
    Setting("dkim", "selector", str, "", "DKIM selector (`s=`); signing is on when it is set."),
    Setting("dkim", "domain", str, "", "Signing domain (`d=`); empty: the domain of `newsletter.from_address`."),
    Setting("dkim", "algorithm", str, "rsa-sha256",
            "Algorithm of the `dkim.selector` key: `rsa-sha256`, or `ed25519-sha256` (RFC 8463) alone, which "
            "receivers that do not know Ed25519 treat as unsigned.",
            choices=("rsa-sha256", "ed25519-sha256")),  # dkim_keys.ALGORITHMS, without importing OpenSSL
    Setting("dkim", "key_file", str, "",
            "PEM private key file for `dkim.selector`, kept outside the repository (empty: read `dkim.key_env`).",
            path=True),
    Setting("dkim", "key_env", str, "DIGEST_DKIM_KEY",
            "Environment variable holding the PEM private key, used when `dkim.key_file` is empty."),
    Setting("dkim", "ed25519_selector", str, "",
            "Selector of a second, Ed25519 signature added beside the RSA one (RFC 8463 dual signing; "
            "empty: none)."),
    Setting("dkim", "ed25519_key_file", str, "",
            "PEM Ed25519 private key file for `dkim.ed25519_selector` (empty: read `dkim.ed25519_key_env`).",
            path=True),
    Setting("dkim", "ed25519_key_env", str, "DIGEST_DKIM_ED25519_KEY",
            "Environment variable holding the PEM Ed25519 private key, used when `dkim.ed25519_key_file` is "
            "empty."),
    Setting("dkim", "relay_signs", bool, False,
            "The SMTP relay signs the mail (OpenDKIM, rspamd, a provider): no warning when `dkim.selector` is empty."),
    Setting("render", "templates", str, "",
            "Folder of template overrides, searched before the built-in templates (empty: none).", path=True),
    Setting("newsletter", "name", str, "Paper Digest", "Newsletter name: sender name, header and footer."),
    Setting("newsletter", "from_address", str, "digest@example.org", "The From address.", check="email"),
    Setting("newsletter", "reply_to", str, "", "Reply-To address (empty: none).", check="email"),
    Setting("newsletter", "base_url", str, "https://digest.example.org",
            "Public https URL the unsubscribe, preferences and feedback links start with (http only for a "
            "local trial on this machine: localhost, 127.0.0.0/8, [::1]).", check="https"),
    Setting("newsletter", "postal_address", str, "Paper Digest, 1 Example Street, Example City",
            "Postal address shown in every footer (required of bulk senders by CAN-SPAM)."),
    Setting("newsletter", "unsubscribe_mailto", str, "",
            "Address for mailto unsubscribes in List-Unsubscribe (empty: https link only).", check="email"),
    Setting("newsletter", "secret_env", str, "DIGEST_SECRET",
            "Environment variable holding the key that signs link tokens. Unset: a key kept in the database."),
    Setting("select", "window_days", int, 7,
            "A paper is new for this many days after it first reaches the store.", minimum=1, maximum=3650),
    Setting("select", "max_age_days", int, 30,
            "A paper published more than this many days before the digest date is not shown as new: it can only "
            "appear under \"Trending again\" (see select.trending_again); 0: no limit.", minimum=0, maximum=36500),
    Setting("select", "trending_again", int, 3,
            "At most this many papers older than select.max_age_days, ranked like the others, in a \"Trending "
            "again\" section after the new ones, taking their places from within max_papers (at most half of "
            "them, unless too few new papers matched; 0: never shown).", minimum=0, maximum=50),
    Setting("select", "min_relevance", (int, float), 0.5,
            "Minimum relevance to be picked: the estimated probability that a paper is on the interest's topic "
            "(0 to 1). In the ranking benchmark, 0.5 let through 49% of the relevant papers, 73% of what it let "
            "through being relevant; 0.6 let through 37% at 77%.", minimum=0, maximum=1),
    Setting("select", "title_weight", (int, float), 3.0,
            "How much more a term in the title counts than one in the abstract.", minimum=0, maximum=100),
    Setting("select", "upvote_weight", (int, float), 0.5,
            "Weight of a paper's trend (its upvotes, comments, GitHub stars and citations, log-scaled; see "
            "docs/ranking.md) in the final score.", minimum=0, maximum=100),
    Setting("select", "comment_weight", (int, float), 2.0,
            "How many upvotes one comment counts as in the trend.", minimum=0, maximum=1000),
    Setting("select", "star_weight", (int, float), 0.2,
            "How many upvotes one GitHub star of the paper's code counts as in the trend.", minimum=0, maximum=1000),
    Setting("select", "citation_weight", (int, float), 1.0,
            "How many upvotes one citation counts as in the trend (with [signals] citations).", minimum=0,
            maximum=1000),
    Setting("select", "recency_weight", (int, float), 0.3, "Weight of recency in the final score.", minimum=0,
            maximum=100),
    Setting("select", "recency_half_life_days", (int, float), 30.0,
            "Days after publication at which the recency bonus halves.", minimum=0.1, maximum=36500),
    Setting("select", "description_weight", (int, float), 0.3,
            "How much each word of an interest's `description` counts next to a keyword (1).", minimum=0, maximum=100),
    Setting("select", "seed_weight", (int, float), 3.0,
            "With `select.text_model = false`: weight of the similarity to an interest's `seed_papers` (Rocchio: their "
            "centroid joins the query). With the text model, seed papers are a library.",
            minimum=0, maximum=100),
    Setting("select", "feedback_clicks", (int, float), 10.0,
            "Feedback marks (more + less) at which the subscriber's learned model counts as much as their keywords; "
            "with fewer it counts less, with many more it decides.", minimum=0, maximum=1e6),
    Setting("select", "diversity", (int, float), 0.3,
            "Maximal marginal relevance: 0 ranks by score alone; higher keeps near-duplicates apart (at most 1).",
            minimum=0, maximum=1),
    Setting("select", "text_model", bool, True,
            "Rank with the built-in text model (all-MiniLM-L6-v2, run by ONNX Runtime, shipped in the package) fused "
            "with the words; `false` ranks on words alone (BM25F) and ignores libraries."),
    Setting("select", "allocation", str, "shares",
            "How a reader's several interests share a digest: `shares` (each interest with papers above the floor "
            "gets places in proportion to its weight, the rest go to the best of the others), `xquad` (a "
            "diversification that rewards covering interests), `off` (one order over all interests, the loudest "
            "taking most places).", choices=("shares", "xquad", "off")),
    Setting("select", "stored_matches", str, "auto",
            "Keep each interest's matches in the store (the cache table, about 3 kB an interest, rewritten each day) "
            "so that a send scores each interest once and only the papers new since, with the same digests: "
            "`auto` where a batch's readers share interests (catalogue topics: half the ranking's CPU), `always`, "
            "`never`.", choices=("auto", "always", "never")),
    Setting("schedule", "fetch_cron", str, "0 * * * *",
            "When `digest schedule` fetches the sources (crontab syntax, in schedule.timezone; empty: never).",
            check="cron"),
    Setting("schedule", "timezone", str, "UTC", "Timezone of fetch_cron (an IANA name).", check="timezone"),
    Setting("schedule", "grace_minutes", int, 120,
            "How late a missed send may still go out (daemon restarts, `digest run` from cron).", minimum=0,
            maximum=1440),
    Setting("delivery", "quiet_days", str, "skip",
            "When nothing new passes a subscriber's relevance floor: skip the digest, or send the top "
            "trending papers.", choices=("skip", "trending")),
    Setting("web", "operator_password_env", str, "DIGEST_OPERATOR_PASSWORD",
            "Environment variable holding the operator pages' password (HTTP basic); unset: `digest serve` makes "
            "one at start and prints it."),
    Setting("web", "operator_login", bool, True,
            "Ask for the operator password on /admin/. Only an explicit `false` opens the operator pages without "
            "one, and then only on a loopback-bound server to requests that did not come through a proxy."),
    Setting("web", "metrics_token_env", str, "DIGEST_METRICS_TOKEN",
            "Environment variable holding a bearer token that also opens `/metrics` (for a Prometheus that should "
            "not hold the operator password); unset or empty: only the operator password does."),
    Setting("web", "link_days", int, 30,
            "Days the preferences and feedback links of an email work after its date (the unsubscribe link "
            "never expires).", minimum=1),
    Setting("web", "access_log", str, "",
            "Where `digest serve` writes its access log (common log format, link tokens redacted): a file, made "
            "0600 and appended to (relative to this file's folder), or `-` for stderr; empty: none."),
    Setting("signup", "enabled", bool, True,
            "Answer the signup page (`/subscribe`) and its confirmation links; `false`: 404, nobody can sign up."),
    Setting("signup", "confirm_hours", int, 48,
            "Hours a signup's confirmation link works; after that the reader signs up again.", minimum=1,
            maximum=24 * 30),
    Setting("signup", "per_ip_hour", int, 10,
            "Signup forms one IP address (an IPv6 /64) may send in an hour; more get 429.", minimum=1,
            maximum=1_000_000),
    Setting("signup", "per_address_day", int, 3,
            "Signups for one email address in a day (so nobody can flood an inbox with confirmations); more "
            "get 429.", minimum=1, maximum=1000),
    Setting("signup", "proxy_hops", int, 0,
            "Reverse proxies in front of `digest serve` that add the client's address to X-Forwarded-For "
            "(nginx with `$proxy_add_x_forwarded_for`: 1). 0: the connecting address is the client's.",
            minimum=0, maximum=10),
    Setting("libraries", "lookup", bool, True,
            "Look up, in the background, the arXiv ids and DOIs a reader's library names that the store lacks "
            "(the arXiv API, and Crossref for DOIs), so that a list of ids counts; `false`: never ask them (an "
            "install without network: such entries count once a source brings their papers in)."),
    Setting("libraries", "arxiv_api", str, "",
            "The arXiv API the lookups ask (empty: https://export.arxiv.org/api/query)."),
    Setting("libraries", "doi_api", str, "",
            "The DOI service the lookups ask, its works endpoint (empty: https://api.crossref.org/works/)."),
    Setting("fetch", "timeout", (int, float), 30.0,
            "Seconds to wait on a source's server in one attempt before giving up on that attempt.", minimum=0.1,
            maximum=3600),
    Setting("fetch", "retries", int, 3, "Extra attempts after a 429, a 5xx, a timeout or a broken connection.",
            minimum=0, maximum=20),
    Setting("fetch", "backoff", (int, float), 2.0, "Seconds before the first retry; doubled for each further one.",
            minimum=0, maximum=3600),
    Setting("fetch", "max_wait", (int, float), 120.0,
            "Longest wait honoured between attempts (Retry-After or backoff); a longer one fails the source.",
            minimum=0, maximum=86400),
    Setting("fetch", "user_agent", str, "",
            "User-Agent sent to sources (empty: paper-digest/VERSION and the project's URL).", check="header"),
    Setting("summaries", "endpoint", str, "",
            "OpenAI-compatible API the daily job asks for one TL;DR per paper (`POST {endpoint}/chat/completions`), "
            "like http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1; empty: none, the sentence "
            "quoted from the abstract is shown.", check="url"),
    Setting("summaries", "model", str, "", "The model named in each request (empty: no summaries)."),
    Setting("summaries", "key_env", str, "DIGEST_SUMMARIES_KEY",
            "Environment variable holding the API key, sent as `Authorization: Bearer` (unset or empty: none; "
            "never written in this file)."),
    Setting("summaries", "daily_budget", int, 200,
            "Papers the endpoint is asked about per day, newest first (0: none).", minimum=0, maximum=100_000),
    Setting("summaries", "timeout", (int, float), 20.0,
            "Seconds to wait for one answer; a timeout ends the step.", minimum=0.1, maximum=600),
    Setting("summaries", "max_chars", int, 300,
            "Longest summary kept, in characters (cut at a word boundary).", minimum=40, maximum=1000),
    Setting("summaries", "deadline", (int, float), 300.0,
            "Seconds the whole summary step may take in a run; the send follows.", minimum=1, maximum=3600),
    Setting("signals", "github", bool, False,
            "Ask the GitHub API for the stars of the repositories the window's papers name (the source's link, or "
            "a github.com link in the abstract), for the trend; false: only the stars a source reports."),
    Setting("signals", "github_api", str, "https://api.github.com", "The GitHub REST API's root.", check="url"),
    Setting("signals", "github_token_env", str, "GITHUB_TOKEN",
            "Environment variable holding a GitHub token (unset: none; GitHub allows 60 requests an hour "
            "without one, 5,000 with; never written in this file)."),
    Setting("signals", "github_budget", int, 50, "Requests to GitHub per day (one per repository).", minimum=0,
            maximum=100_000),
    Setting("signals", "citations", str, "",
            "Where the window's papers' citation counts come from, for the trend: \"openalex\" (by DOI; an arXiv "
            "paper by arXiv's DOI), or empty: none.", choices=("", "openalex")),
    Setting("signals", "openalex_api", str, "https://api.openalex.org", "OpenAlex's API root.", check="url"),
    Setting("signals", "mailto", str, "",
            "Contact address sent to OpenAlex (its polite pool answers faster; empty: none).", check="email"),
    Setting("signals", "citations_budget", int, 20,
            "Requests to OpenAlex per day (50 papers each).", minimum=0, maximum=100_000),
    Setting("signals", "deadline", (int, float), 120.0,
            "Seconds the signals step may take in a run; no request starts after it, and the send follows.",
            minimum=1, maximum=3600),
)

# The fields of one `[[sources]]` entry (an array of tables, so not in SETTINGS).
SOURCE_FIELDS: tuple[Setting, ...] = (
    Setting("sources", "kind", str, "", "What to read.", choices=KINDS),
    Setting("sources", "name", str, "", "Name shown in reports and `digest status` (empty: kind and URL)."),
    Setting("sources", "url", str, "", "URL to fetch; `{date}` becomes the day fetched (YYYY-MM-DD). "
            "hf_daily and hf_page have defaults.", check="url"),
    Setting("sources", "path", str, "", "For `file`: a file, folder or glob, relative to the config file."),
    Setting("sources", "categories", list, [], "For `arxiv`: categories whose new listings to read (cs.LG, …)."),
    Setting("sources", "query", str, "", "For `arxiv`: an arXiv API search query (newest 200 results)."),
    Setting("sources", "days", int, 1, "For `biorxiv` and `medrxiv`: how many days to read, ending on the day "
            "fetched.", minimum=1, maximum=31),
    Setting("sources", "venue", str, "", "For `openreview`: the venue id whose papers to read "
            "(ICLR.cc/2025/Conference; its /Submission for those under review)."),
)


# Settings that were removed, and what to write instead.
REMOVED = {
    "select.relevance_floor": "it was a BM25 score; use select.min_relevance, a probability from 0 to 1 "
                              "(0.5 is the default, see docs/configuration.md)",
    "select.dense_weight": "the built-in text model replaced the WordLlama embeddings and is fused with the words "
                           "with fitted weights; use select.text_model = true or false",
    "select.semantic_weight": "the built-in text model is the all-MiniLM-L6-v2 model the semantic extra added, now "
                              "in the default install and fused with fitted weights; use select.text_model",
    "select.liked_weight": "feedback is a learned model now; select.feedback_clicks sets how fast it takes over",
    "select.disliked_weight": "feedback is a learned model now; select.feedback_clicks sets how fast it takes over",
}

_TYPE_NAMES = {str: "a string", int: "a whole number", list: "a list", bool: "true or false"}


def _find(section: str, key: str) -> Setting | None:
    return next((s for s in SETTINGS if s.section == section and s.key == key), None)


def _shown(name: str) -> str:
    """A name from the file as it can be shown on one line: quoted and escaped when it holds anything unprintable."""
    return name if name.isprintable() and name.strip() == name and name else repr(name)


def _hint(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(options))})"


def _check_type(setting: Setting, value: Any, where: str) -> Any:
    ok = isinstance(value, setting.type) and not (isinstance(value, bool) and setting.type is not bool)
    if not ok:
        expected = _TYPE_NAMES.get(setting.type, "a number")
        raise ConfigError(f"{where}: {setting.name} must be {expected}, not {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {setting.name} must be a finite number, not {value!r}")
    if setting.choices and value not in setting.choices:
        raise ConfigError(f"{where}: {setting.name} must be one of {', '.join(setting.choices)}, not {value!r}")
    if setting.minimum is not None and value < setting.minimum:
        raise ConfigError(f"{where}: {setting.name} must be at least {setting.minimum:g}, not {value!r}")
    if setting.maximum is not None and value > setting.maximum:
        raise ConfigError(f"{where}: {setting.name} must be at most {setting.maximum:g}, not {value!r}")
    texts = value if isinstance(value, list) else [value]
    for text in texts:
        if setting.type is list and not isinstance(text, str):
            raise ConfigError(f"{where}: {setting.name} must be a list of strings, not {value!r}")
        if isinstance(text, str) and _CONTROL.search(text):
            raise ConfigError(f"{where}: {setting.name} must be one line of text without control characters, "
                              f"not {text!r}")
    problem = CHECKS[setting.check](value) if setting.check and value != "" else None
    if problem:
        raise ConfigError(f"{where}: {setting.name} {problem}, not {value!r}")
    return value


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _email_problem(value: str) -> str | None:
    from email_validator import EmailNotValidError, validate_email  # loaded only when an address is set

    try:
        validate_email(value, check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError as exc:
        return f"must be an email address like digest@example.org ({exc})"
    if "=?" in value:  # (email-validator allows it; mail programs decode it as an encoded word in a header)
        return f"must be a plain email address like digest@example.org ({ENCODED_WORD})"
    return None


def _url_problem(value: str, *, https: bool = False) -> str | None:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value.replace("{date}", "2026-01-01"))
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        return f"must be a URL ({exc})"
    schemes = ("https",) if https else ("http", "https")
    if https and parts.scheme == "http" and parts.hostname and is_loopback_host(parts.hostname):
        return None  # a local trial of every link against `digest serve`; readers elsewhere need https (RFC 8058)
    if parts.scheme not in schemes or not parts.hostname or " " in value:
        if https:
            return ("must be an https URL with a host, like https://example.org/ (http only for this machine: "
                    "localhost, 127.0.0.1 or [::1])")
        return "must be an http or https URL with a host, like https://example.org/"
    return None


def is_loopback_host(host: str) -> bool:
    """Whether a URL's host is this machine: localhost, 127.0.0.0/8 or ::1 (the only hosts base_url may name over
    http)."""
    import ipaddress

    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _timezone_problem(value: str) -> str | None:
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(value)
    except (ValueError, OSError, KeyError):  # ZoneInfoNotFoundError is a KeyError; odd names raise ValueError
        return "must be an IANA time zone like Europe/London or UTC"
    return None


def _cron_problem(value: str) -> str | None:
    from apscheduler.triggers.cron import CronTrigger

    try:
        CronTrigger.from_crontab(value, timezone="UTC")
    except (ValueError, TypeError) as exc:
        return f"must be a crontab expression of five fields like '0 * * * *' ({exc})"
    return None


def _header_problem(value: str) -> str | None:
    """A value sent as an HTTP header: printable ASCII (RFC 9110's field values; httpx refuses anything else)."""
    return "must be printable ASCII (it is sent as an HTTP header)" if not re.fullmatch(r"[ -~]*", value) else None


def _host_problem(value: str) -> str | None:
    return "must be a host name or IP address" if not re.fullmatch(r"[A-Za-z0-9._:\-\[\]]+", value) else None


def _database_problem(value: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(value)
    except (ArgumentError, ValueError) as exc:
        # SQLAlchemy's reason quotes the part after the first '@', which may be the rest of a password
        why = "a password holding @, : or / must be written %40, %3A, %2F" if "@" in value else exc
        return f"must be a database URL like sqlite:///digest.db or postgresql://host/db ({why})"
    return None


CHECKS = {"email": _email_problem, "url": _url_problem, "https": lambda v: _url_problem(v, https=True),
          "timezone": _timezone_problem, "cron": _cron_problem, "host": _host_problem, "database": _database_problem,
          "header": _header_problem}


def _validate(raw: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    sections = sorted({s.section for s in SETTINGS} | {"sources", "topics"})
    values: dict[str, dict[str, Any]] = {}
    for section, table in raw.items():
        if section in ("sources", "topics"):
            continue  # arrays of tables, read by _sources and read_topics
        if section not in sections:
            raise ConfigError(f"{where}: unknown section [{_shown(section)}]{_hint(section, sections)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
        keys = [s.key for s in SETTINGS if s.section == section]
        for key, value in table.items():
            setting = _find(section, key)
            if f"{section}.{key}" in REMOVED:
                raise ConfigError(f"{where}: {section}.{key} is no longer a setting: {REMOVED[f'{section}.{key}']}")
            if setting is None:
                raise ConfigError(f"{where}: unknown setting {section}.{_shown(key)}{_hint(key, keys)}")
            values.setdefault(section, {})[key] = _check_type(setting, value, where)
    return values


def _resolve(setting: Setting, value: Any, base: Path) -> Any:
    if setting.name == "store.url" and value.startswith("sqlite:///") and not value.startswith("sqlite:////"):
        path = value.removeprefix("sqlite:///")
        return value if path in ("", ":memory:") else "sqlite:///" + str(base / path)
    if not setting.path or value == "":
        return value
    if isinstance(value, list):
        return [base / str(item) for item in value]
    return base / value


class Config(SimpleNamespace):
    """Validated settings, one attribute per section (`config.select.window_days`)."""

    source: Path | None
    base: Path
    sources: tuple[SourceSpec, ...]
    topics: tuple[Topic, ...]

    @property
    def newsletter_info(self) -> Newsletter:
        n = self.newsletter
        return Newsletter(name=n.name, from_address=n.from_address, reply_to=n.reply_to,
                          base_url=n.base_url.rstrip("/"), postal_address=n.postal_address,
                          unsubscribe_mailto=n.unsubscribe_mailto)


def _sources(raw: Any, where: str, base: Path) -> tuple[SourceSpec, ...]:
    """The `[[sources]]` entries, each checked like a section; file paths made relative to `base`."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise ConfigError(f"{where}: sources must be written as [[sources]] tables")
    keys = [f.key for f in SOURCE_FIELDS]
    specs = []
    for number, entry in enumerate(raw, start=1):
        here = f"{where}: [[sources]] #{number}"
        fields: dict[str, Any] = {}
        for key, value in entry.items():
            field = next((f for f in SOURCE_FIELDS if f.key == key), None)
            if field is None:
                raise ConfigError(f"{here}: unknown field {key!r}{_hint(key, keys)}")
            fields[key] = _check_type(field, value, here)
        if "kind" not in fields:
            raise ConfigError(f"{here}: `kind` is required (one of {', '.join(KINDS)})")
        if fields.get("path"):
            fields["path"] = str(base / fields["path"])
        spec = SourceSpec(**{**fields, "categories": tuple(map(str, fields.get("categories", ())))})
        if spec.problem():
            raise ConfigError(f"{here}: {spec.problem()}")
        specs.append(spec)
    return tuple(specs)


def build_config(raw: dict[str, Any], *, base: Path, source: Path | None = None) -> Config:
    """Validate a parsed settings table and fill in every default."""
    where = str(source) if source else "settings"
    values = _validate(raw, where)
    sources = _sources(raw.get("sources"), where, base)
    topics = read_topics(raw.get("topics"), where)
    sections: dict[str, SimpleNamespace] = {}
    for setting in SETTINGS:
        value = values.get(setting.section, {}).get(setting.key, setting.default)
        ns = sections.setdefault(setting.section, SimpleNamespace())
        setattr(ns, setting.key, _resolve(setting, value, base))
    return Config(source=source, base=base, sources=sources, topics=topics, **sections)


def load_config(path: Path | None = None, *, cwd: Path | None = None, required: bool = False) -> Config:
    """Read settings from `path`, else $DIGEST_CONFIG, else ./digest.toml, else (unless `required`) the defaults."""
    cwd = cwd or Path.cwd()
    explicit = path or (Path(os.environ[CONFIG_ENV]) if os.environ.get(CONFIG_ENV) else None)
    candidate = explicit or cwd / DEFAULT_FILE
    if not candidate.exists():
        if explicit:
            raise ConfigError(f"{candidate}: config file not found")
        if required:
            raise ConfigError(f"no {DEFAULT_FILE} in {cwd}: run in the folder that holds it, or name it with "
                              f"--config FILE (or ${CONFIG_ENV})")
        return build_config({}, base=cwd)
    try:
        raw = tomllib.loads(candidate.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{candidate}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{candidate}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
                          ) from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"{candidate}: is a folder; name the settings file (like {candidate / DEFAULT_FILE})"
                          ) from exc
    except OSError as exc:
        raise ConfigError(f"{candidate}: cannot read: {exc.strerror or exc}") from exc
    return build_config(raw, base=candidate.resolve().parent, source=candidate)
