"""Going live: `digest check` lists what is not ready for real readers with the setting and the fix, a send over SMTP
under the sample's identity stops (exit 2) unless it is a lab, and the DKIM warning is given once per run."""

from __future__ import annotations

import base64
import logging
import re
import shutil
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from digest import daily
from digest import readiness as launch
from digest.app import App
from digest.config import build_config, load_config
from digest.delivery.mailer import UNSIGNED
from digest.errors import ConfigError

from .conftest import DAY, SEEDS, cli_env, sample_site
from .smtpd import Recorder, smtp_server

LAB = {"DIGEST_ALLOW_PLACEHOLDER": ""}  # the test suite is a lab (conftest); these tests are not
IDENTITY = ('[newsletter]\nfrom_address = "digest@papers.acme.dev"\nbase_url = "https://digest.papers.acme.dev"\n'
            'postal_address = "Acme Papers, 12 Quay Road, Leith"\n')
READY = IDENTITY + '[dkim]\nrelay_signs = true\n[smtp]\nhost = "smtp.acme.dev"\n[[sources]]\nkind = "hf_daily"\n'


def digest(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=cli_env(**{**LAB, **env}))


def ingest(site: Path) -> None:
    app = App(load_config(site / "digest.toml"))
    try:
        app.ingest([SEEDS], seen_on=DAY)
    finally:
        app.close()


def smtp_settings(port: int) -> str:
    return f'[delivery]\ntransport = "smtp"\nretry_delay = 0.01\n[smtp]\nhost = "127.0.0.1"\nport = {port}\n' \
           'security = "none"\n'


@pytest.mark.slow
def test_check_on_the_sample_names_every_setting_with_its_fix(tmp_path):
    """The sample as shipped: the placeholder From, base_url and postal address (each stopping an SMTP send), no
    secret in the environment and no DKIM, each on one line with its fix; SPF and DMARC to publish; exit 1."""
    result = digest(sample_site(tmp_path), "check", DIGEST_SECRET="")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    stops = [line for line in lines if line.startswith("stop: ")]
    assert [line.split(":")[1].strip() for line in stops] == [
        "newsletter.from_address", "newsletter.base_url", "newsletter.postal_address"]
    assert all("; fix: " in line for line in stops)
    not_ready = {line.split(":")[1].strip() for line in lines if line.startswith("not ready: ")}
    assert not_ready == {"newsletter.secret_env", "dkim.selector", "sources", "subscribers"}
    readers = next(line for line in lines if line.startswith("not ready: subscribers: "))
    assert readers.startswith("not ready: subscribers: 5 of 5 subscribers are on reserved example domains "
                              "(ada@example.org, alan@example.org, grace@example.org, …)")
    assert '  example.org TXT "v=spf1 ' in result.stdout
    assert '  _dmarc.example.org TXT "v=DMARC1; p=none; ' in result.stdout
    assert lines[-1] == "7 to fix before real readers (3 would stop a send over SMTP); run `digest check` again " \
                        "after each fix"


@pytest.mark.slow
def test_check_passes_a_ready_install_and_prints_the_records_for_its_domain(tmp_path):
    """Own identity, a secret, a relay that signs, own readers: exit 0; the records name the From domain and the
    relay."""
    site = sample_site(tmp_path, READY)
    for profile in (site / "subscribers").glob("*.toml"):  # the operator's own readers instead of the sample's
        profile.write_text(profile.read_text().replace("@example.org", "@uni.acme.dev"))
    result = digest(site, "check", "--config", str(tmp_path / "digest.toml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "ready for real readers"
    assert 'papers.acme.dev TXT "v=spf1 a:smtp.acme.dev ~all"' in result.stdout
    assert "_dmarc.papers.acme.dev TXT" in result.stdout
    assert 'note: delivery.transport is "outbox"' in result.stdout  # the last step, not yet taken
    assert "assumed: a TLS proxy answers https://digest.papers.acme.dev" in result.stdout


def test_check_of_an_invalid_setting_is_a_configuration_error(tmp_path):
    """A base_url over http to another machine is refused when the settings are read: exit 2, one line."""
    site = sample_site(tmp_path, '[newsletter]\nbase_url = "http://digest.papers.acme.dev"\n')
    result = digest(site, "check")
    assert result.returncode == 2
    assert result.stderr.startswith(f"digest: error: {site / 'digest.toml'}: newsletter.base_url must be an https URL")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(("base_url", "serve", "wanted"), [
    ("http://127.0.0.1:9000", launch.Serve(), "digest serve --port 9000"),
    ("http://127.0.0.1:9000", launch.Serve(port=9000), None),
    ("http://localhost:8025/digest", launch.Serve(), None),
    ("http://[::1]:8025", launch.Serve(), "digest serve --host ::1"),
    ("http://[::1]:8025", launch.Serve(host="::1"), None),
    ("http://127.0.0.2:8025", launch.Serve(host="0.0.0.0"), None),
    ("https://localhost:8025", launch.Serve(), "http://localhost:8025"),
    ("https://digest.papers.acme.dev", launch.Serve(), None),
    ("https://digest.papers.acme.dev:8025", launch.Serve(host="0.0.0.0"), "put a TLS proxy in front"),
    ("https://digest.papers.acme.dev/?x=1", launch.Serve(), "remove the part from '?'"),
])
def test_a_base_url_the_configured_serve_would_not_answer(tmp_path, base_url, serve, wanted):
    """Port, loopback address, TLS and query compared with how `digest serve` is started (--host/--port)."""
    config = build_config({"newsletter": {"base_url": base_url}}, base=tmp_path)
    fixes = [f.fix for f in launch.served(config, serve)]
    assert (wanted is None and fixes == []) or any(wanted in fix for fix in fixes), fixes


@pytest.mark.parametrize(("settings", "placeholder"), [
    ({"newsletter": {"from_address": "news@mail.example.com"}}, "newsletter.from_address"),
    ({"newsletter": {"reply_to": "editor@news.example.com"}}, "newsletter.reply_to"),
    ({"delivery": {"return_path": "bounces@example.net"}}, "delivery.return_path"),
    ({"newsletter": {"base_url": "https://digest.example.org/papers"}}, "newsletter.base_url"),
    ({"newsletter": {"base_url": "http://127.0.0.1:8025"}}, "newsletter.base_url"),
    ({"newsletter": {"postal_address": "Acme, 1 Example Street, Leith"}}, "newsletter.postal_address"),
])
def test_each_placeholder_of_the_identity_is_found(tmp_path, settings, placeholder):
    """Any address on a reserved example domain, the sample's base_url or street, or a base_url on this machine."""
    raw = {"newsletter": {"from_address": "digest@papers.acme.dev", "base_url": "https://digest.papers.acme.dev",
                          "postal_address": "Acme Papers, 12 Quay Road, Leith"}}
    for section, values in settings.items():
        raw.setdefault(section, {}).update(values)
    config = build_config(raw, base=tmp_path)
    found = launch.identity(config)
    assert [f.setting for f in found] == [placeholder] and found[0].stops_smtp
    # An operator's own loopback base_url is no "sample's" identity: the stop names what it is, nothing more.
    with pytest.raises(ConfigError, match=rf"would go out under a placeholder identity \({re.escape(placeholder)}\);"):
        launch.smtp_gate(config, {}, allow_placeholder=False)


@pytest.mark.slow
def test_an_smtp_send_under_the_placeholder_stops_with_exit_2_and_sends_nothing(tmp_path):
    """send, send --to, run, worker, schedule, and serve (its signup emails) over SMTP with the sample's identity:
    one line, exit 2, nothing reaches the server; the outbox is never blocked."""
    server = Recorder()
    with smtp_server(server) as port:
        site = sample_site(tmp_path, smtp_settings(port))
        for args in (["send", "--date", "2026-06-12"], ["run"], ["worker"], ["schedule"], ["serve", "--port", "0"],
                     ["send", "--subscriber", "ada@example.org", "--to", "tester@papers.acme.dev"]):
            result = digest(site, *args)
            assert result.returncode == 2, (args, result.stderr)
            [line] = result.stderr.splitlines()
            assert "placeholder identity (newsletter.from_address, newsletter.base_url, newsletter.postal_address)" \
                in line and "--allow-placeholder" in line
    assert server.messages == []
    outbox = tmp_path / "outbox-site"
    outbox.mkdir()
    ingest(sample_site(outbox))
    assert digest(outbox, "send", "--date", "2026-06-12", "--subscriber", "ada@example.org").returncode == 0
    assert list((outbox / "outbox" / "2026-06-12").glob("*.eml"))


@pytest.mark.slow
def test_a_lab_sends_with_allow_placeholder_and_a_real_identity_sends_with_a_warning(tmp_path):
    """--allow-placeholder (after the command, with -v) lets the sample's identity through; an own identity needs
    no flag, and the missing secret and the missing sources are a warning line each."""
    server = Recorder()
    with smtp_server(server) as port:
        site = sample_site(tmp_path, smtp_settings(port))
        ingest(site)
        lab = digest(site, "send", "--date", "2026-06-12", "--subscriber", "ada@example.org", "--allow-placeholder",
                     "-v")
        assert lab.returncode == 0 and lab.stdout.startswith("2026-06-12: sent 1,"), lab.stderr
        with (site / "digest.toml").open("a") as settings:
            settings.write(IDENTITY)
        real = digest(site, "send", "--date", "2026-06-12", "--subscriber", "margaret@example.org", DIGEST_SECRET="")
    assert real.returncode == 0, real.stderr
    warnings = [line for line in real.stderr.splitlines() if "not ready for real readers" in line]
    assert len(warnings) == 2 and "newsletter.secret_env: $DIGEST_SECRET is not set" in warnings[0]
    assert "sources: no [[sources]] configured" in warnings[1]
    assert [m.message["From"].addresses[0].addr_spec for m in server.messages] == [
        "digest@example.org", "digest@papers.acme.dev"]


@pytest.mark.slow
def test_the_dkim_warning_is_given_once_per_run_not_once_per_date(smtp_app, caplog):
    """A `digest run` just before midnight UTC sends two digest dates (Tokyo's tomorrow, New York's today) with
    one unsigned-mail warning."""
    with smtp_server(Recorder()) as port:
        app = smtp_app(port)
        with caplog.at_level(logging.WARNING, logger="digest"):
            report = daily.run(app, datetime(2026, 6, 12, 23, 0, tzinfo=UTC))
    assert sorted(str(s.day) for s in report.sends) == ["2026-06-12", "2026-06-13"]
    assert [r.getMessage() for r in caplog.records].count(UNSIGNED) == 1


def test_the_samples_commented_newsletter_table_is_caught_if_uncommented_unchanged(tmp_path):
    """digest.toml's `[newsletter]` example, uncommented as it is, is still the placeholder identity."""
    text = (Path(__file__).resolve().parent.parent / "digest.toml").read_text(encoding="utf-8")
    table = text[text.index("# [newsletter]"):].split("\n\n")[0]
    raw = tomllib.loads("\n".join(line.removeprefix("# ") for line in table.splitlines() if line.startswith("# ")))
    found = launch.identity(build_config(raw, base=tmp_path))
    assert [f.setting for f in found] == ["newsletter.from_address", "newsletter.base_url", "newsletter.postal_address"]


def test_the_docs_say_how_to_go_live_in_order_and_the_readme_leads_somewhere():
    """The "Going live" steps come in order before "Running unattended", the README's reading list names the commands
    before going live, and every page#heading link of that list names a heading of its page."""
    root = Path(__file__).resolve().parent.parent
    operating = (root / "docs" / "operating.md").read_text(encoding="utf-8")
    going_live = operating[operating.index("## Going live"):operating.index("## Running unattended")]
    steps = re.findall(r"^\d\. \*\*(.+?)\.\*\*", going_live, flags=re.M)
    assert steps == ["Identity", "Secret", "DKIM", "base_url", "Check", "Switch the transport"]
    readme = (root / "README.md").read_text(encoding="utf-8")
    reading = readme[readme.index("## Where to read on"):]
    assert reading.index("(docs/commands.md") < reading.index("(docs/operating.md#going-live)")
    assert operating.index("## Going live") < operating.index("## Running unattended")

    def slug(heading: str) -> str:
        return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")

    def anchors(page: str) -> set[str]:
        return {slug(h) for h in re.findall(r"^#{2,3} (.+)$", (root / page).read_text(encoding="utf-8"), flags=re.M)}

    links = set(re.findall(r"\]\((docs/[^)#]+)#([^)]+)\)", reading))
    missing = {(page, anchor) for page, anchor in links if anchor not in anchors(page)}
    assert len(links) >= 20 and not missing, missing


@pytest.mark.slow
def test_check_prints_the_dkim_records_with_the_public_keys_the_readme_commands_print(tmp_path):
    """The DKIM records carry the real p= (an RSA key file, an Ed25519 key in the environment), equal to what the
    openssl commands of docs/delivery.md print; the RSA record is split into strings of at most 255 characters; a
    key that cannot be read leaves the placeholder and the finding that says why."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    rsa_pem, ed_pem = tmp_path / "dkim.pem", tmp_path / "dkim-ed25519.pem"
    subprocess.run([openssl, "genrsa", "-out", str(rsa_pem), "2048"], check=True, capture_output=True)
    subprocess.run([openssl, "genpkey", "-algorithm", "ed25519", "-out", str(ed_pem)], check=True, capture_output=True)
    rsa_pem.chmod(0o600)

    def public(kind: str, pem: Path) -> str:
        der = subprocess.run([openssl, kind, "-in", str(pem), "-pubout", "-outform", "DER"], check=True,
                             capture_output=True).stdout
        return base64.b64encode(der if kind == "rsa" else der[-32:]).decode()

    (tmp_path / "site").mkdir()
    site = sample_site(tmp_path / "site", IDENTITY + f'[dkim]\nselector = "mail"\nkey_file = "{rsa_pem}"\n'
                                                     'ed25519_selector = "ed"\n')
    result = digest(site, "check", DIGEST_DKIM_ED25519_KEY=ed_pem.read_text())
    records = {line.split()[0]: line for line in result.stdout.splitlines() if "._domainkey." in line}
    rsa_line, ed_line = records["mail._domainkey.papers.acme.dev"], records["ed._domainkey.papers.acme.dev"]
    strings = re.findall(r'"([^"]*)"', rsa_line)
    assert len(strings) == 2 and all(len(s) <= launch.TXT_STRING for s in strings)
    assert "".join(strings) == f"v=DKIM1; k=rsa; p={public('rsa', rsa_pem)}"
    assert re.findall(r'"([^"]*)"', ed_line) == [f"v=DKIM1; k=ed25519; p={public('pkey', ed_pem)}"]
    assert "<the public key>" not in result.stdout and "dkim" not in result.stdout.split("publish in DNS")[0]

    rsa_pem.chmod(0o644)  # refused as a key file: the record cannot carry it
    result = digest(site, "check", DIGEST_DKIM_ED25519_KEY=ed_pem.read_text())
    assert "not ready: dkim.selector: set, but its key cannot be used" in result.stdout
    assert 'mail._domainkey.papers.acme.dev TXT "v=DKIM1; k=rsa; p=<the public key>"' in result.stdout


def test_readers_on_example_domains_are_found_on_both_databases(store_url):
    """Addresses on a reserved domain or under one are counted and the first named; a look-alike is not."""
    from digest.models import Subscriber
    from digest.store import Store

    store = Store(store_url)
    try:
        emails = ["b@example.org", "a@lab.example.com", "c@host.test", "d@example.org.uk", "e@myexample.org",
                  "f@acme.dev"]
        store.put_subscribers([Subscriber(email=e) for e in emails], "import")
        assert store.subscribers_on([*launch.EXAMPLE_DOMAINS, *launch.RESERVED_TLDS], limit=2) == \
            (3, ["a@lab.example.com", "b@example.org"])
        found = launch.readers(store)
        assert [f.setting for f in found] == ["subscribers"]
        assert "3 of 6 subscribers are on reserved example domains (a@lab.example.com, b@example.org, c@host.test)" \
            in found[0].problem
    finally:
        store.close()


def test_check_and_status_say_the_papers_come_from_the_sample_until_sources_are_added(tmp_path, capsys):
    """With no [[sources]], `digest check` names it (not ready, but no reason to stop a send) and `digest status`
    says the papers come from [ingest] paths; once a source is configured, check no longer names it and status
    lists the source as not fetched yet."""
    from digest.cli import main

    site = sample_site(tmp_path)
    config = ["--config", str(site / "digest.toml")]

    def printed(*args: str) -> str:
        capsys.readouterr()
        main([*config, *args])
        return capsys.readouterr().out

    found = [line for line in printed("check").splitlines() if line.startswith("not ready: sources: ")]
    assert found == [f"not ready: sources: no [[sources]] configured: `digest run` and `digest fetch` read only "
                     f"[ingest] paths ({SEEDS}), the same files every time (as shipped, the sample pages), so no new "
                     "paper arrives and every digest keeps coming from them; fix: add the feeds to follow as "
                     '[[sources]] tables (docs/configuration.md, section "Sources")']
    sources = printed("status").split("Sources (last fetch):\n")[1].split("\n\n")[0]
    assert sources == (f"  none configured: every run reads [ingest] paths ({SEEDS}) again, as shipped the sample "
                       'pages; add [[sources]] for new papers (docs/configuration.md, "Sources")')
    with (site / "digest.toml").open("a") as settings:
        settings.write('\n[[sources]]\nkind = "file"\nname = "inbox"\npath = "inbox/*.jsonl"\n')
    assert "sources" not in printed("check")
    assert printed("status").split("Sources (last fetch):\n")[1].split("\n\n")[0] == \
        f"  {'inbox':<24} not fetched yet"
    assert not launch.sources(load_config(site / "digest.toml"))


@pytest.mark.parametrize(("signals", "environ", "named"), [
    ({"github": True, "github_budget": 200}, {}, True),
    ({"github": True, "github_budget": 200}, {"GITHUB_TOKEN": "ghp_x"}, False),
    ({"github": True, "github_budget": 200, "github_token_env": "GH"}, {"GITHUB_TOKEN": "ghp_x"}, True),
    ({"github": True, "github_budget": 60}, {}, False),
    ({"github": False, "github_budget": 200}, {}, False),
])
def test_check_names_github_stars_asked_without_a_token_past_githubs_hourly_limit(tmp_path, signals, environ, named):
    """`[signals] github` with a budget over GitHub's 60 anonymous requests an hour and no token in the variable it
    names is not ready (the fix says both ways out); with a token, or a budget GitHub answers, it is."""
    config = build_config({"signals": signals}, base=tmp_path)
    found = [f for f in launch.check(config, environ, launch.Serve()) if f.setting == "signals.github"]
    assert bool(found) == named
    if named:
        assert "60 requests an hour" in found[0].problem and "lower signals.github_budget to 60" in found[0].fix
