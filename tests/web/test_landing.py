"""Local trial of every link: base_url may be http on this machine (and only there), `digest serve` answers the URL it
prints with a landing page, and the global options work after the command too."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx
import pytest

from digest.app import App
from digest.cli import _parser
from digest.compose import preview
from digest.config import build_config
from digest.errors import ConfigError

from ..conftest import DAY, SEEDS, cli_env, sample_site
from ..smtpd import free_port
from ..web_server import Served, Server
from .test_browser import axe_source, browser, serious_violations  # noqa: F401 - the fixtures

SECRET = "landing-test-secret"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8025", "http://localhost:8025/digest", "http://[::1]:8025",
                                 "http://127.8.0.1", "http://LOCALHOST"])
def test_an_http_base_url_is_accepted_on_this_machine(tmp_path, url):
    """localhost, 127.0.0.0/8 and ::1 may be named over http (a local trial)."""
    assert build_config({"newsletter": {"base_url": url}}, base=tmp_path).newsletter.base_url == url


@pytest.mark.parametrize("url", ["http://digest.papers.acme.dev", "http://10.0.0.1:8025", "http://0.0.0.0:8025",
                                 "http://[::ffff:127.0.0.1]", "http://localhost.papers.acme.dev", "ftp://localhost"])
def test_an_http_base_url_is_refused_anywhere_else(tmp_path, url):
    """Anything else needs https (RFC 8058's one-click POST is https only): one line naming the setting and why."""
    with pytest.raises(ConfigError, match=r"^settings: newsletter.base_url must be an https URL with a host, like "
                                          r"https://example.org/ \(http only for this machine"):
        build_config({"newsletter": {"base_url": url}}, base=tmp_path)


@pytest.mark.slow
def test_serve_answers_the_url_it_prints_and_every_link_of_a_digest(tmp_path, monkeypatch):
    """With base_url http://127.0.0.1:PORT, `digest serve --port PORT` prints that URL, answers it with the signup
    form, and answers every link of a previewed digest; the List-Unsubscribe one-click POST unsubscribes."""
    port = free_port()
    # links dated DAY still work (web.link_days) however long after it the test runs
    site = sample_site(tmp_path, f'[newsletter]\nbase_url = "http://127.0.0.1:{port}"\n[web]\nlink_days = 36500\n')
    monkeypatch.setenv("DIGEST_SECRET", SECRET)
    app = App(build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": "subscribers"},
                            "newsletter": {"base_url": f"http://127.0.0.1:{port}"}}, base=site))
    try:
        app.ingest([SEEDS], seen_on=DAY)
        ada = app.profiles.roster().find("ada@example.org")
        [(composed, _files)] = preview(app.composer, [ada], DAY, tmp_path / "preview")
    finally:
        app.close()
    served = Served(site / "digest.toml", port, {"DIGEST_SECRET": SECRET})
    try:
        home = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        links = sorted(set(re.findall(rf'href="(http://127\.0\.0\.1:{port}/[^"]+)"', composed.rendered.html)))
        answers = {link: httpx.get(link.replace("&amp;", "&"), timeout=10).status_code for link in links}
        [one_click] = re.findall(r"<(http://[^>]+)>", composed.message["List-Unsubscribe"])
        unsubscribed = httpx.post(one_click, data={"List-Unsubscribe": "One-Click"}, timeout=10)
    finally:
        out, _err = served.close()
    assert out.startswith(f"serving on http://127.0.0.1:{port}/ ")
    assert home.status_code == 200
    assert '<form method="post" action="/subscribe" enctype="multipart/form-data">' in home.text
    kinds = {link.split("/")[3] for link in links}
    assert {"unsubscribe", "preferences", "feedback", "view"} <= kinds, links
    assert all(code == 200 for code in answers.values()), answers
    assert unsubscribed.status_code == 200 and "unsubscribed" in unsubscribed.text.lower()


def test_without_signup_the_landing_page_says_what_this_server_is(make_config):
    """signup.enabled = false: `/` is one line in the pages' style; /subscribe stays 404."""
    app = App(make_config(signup={"enabled": False}))
    server = Server(app)
    try:
        home, signup = server.client.get("/"), server.client.get("/subscribe")
    finally:
        server.close()
        app.close()
    assert home.status_code == 200 and signup.status_code == 404
    assert '<html lang="en">' in home.text and "<h1>Paper Digest</h1>" in home.text and "<form" not in home.text
    assert "This server answers the links in Paper Digest's emails" in home.text


def test_under_a_base_path_the_landing_form_posts_beside_it(make_config):
    """base_url with a path: the landing page is that path, its form posts to PATH/subscribe and its script is
    PATH/subscribe.js, both answered; `/` itself is not this newsletter's."""
    app = App(make_config(newsletter={"base_url": "https://digest.papers.acme.dev/papers"}))
    server = Server(app)
    try:
        home, root = server.client.get("/papers/"), server.client.get("/")
        script, form = server.client.get("/papers/subscribe.js"), server.client.get("/papers/subscribe")
    finally:
        server.close()
        app.close()
    assert home.status_code == 200 and root.status_code == 404
    assert '<form method="post" action="/papers/subscribe" enctype="multipart/form-data">' in home.text
    assert 'src="/papers/subscribe.js"' in home.text
    assert script.status_code == 200 and form.status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("signup", [True, False])
def test_the_landing_page_has_no_serious_accessibility_violation(make_config, browser, axe_source, signup):  # noqa: F811
    """axe-core, at phone width, light and dark, finds nothing serious or critical on either landing page."""
    app = App(make_config(signup={"enabled": signup}))
    server = Server(app)
    try:
        for scheme in ("light", "dark"):
            context = browser.new_context(viewport={"width": 375, "height": 800}, color_scheme=scheme,
                                          bypass_csp=True)
            page = context.new_page()
            page.goto(server.base + "/")
            assert serious_violations(page, axe_source) == [], scheme
            context.close()
    finally:
        server.close()
        app.close()


@pytest.mark.parametrize("args", [["send", "-v"], ["-v", "send"], ["--debug", "send", "-v", "--log-format", "json"],
                                  ["subscribers", "list", "--verbose"]])
def test_global_options_go_before_or_after_the_command(args):
    """`digest send -v` is `digest -v send`; an option given before the command is not reset after it."""
    parsed = _parser().parse_args(args)
    assert parsed.verbose is True
    assert parsed.log_format == ("json" if "json" in args else "text")
    assert parsed.debug is ("--debug" in args)


@pytest.mark.slow
def test_config_after_the_command_is_read(tmp_path):
    """`digest check --config FILE` from another folder reads FILE (a missing one is exit 2, naming it)."""
    (tmp_path / "site").mkdir()
    site = sample_site(tmp_path / "site")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = cli_env()
    found = subprocess.run([sys.executable, "-m", "digest", "check", "--config", str(site / "digest.toml")],
                           cwd=elsewhere, capture_output=True, text=True, env=env, timeout=60)
    missing = subprocess.run([sys.executable, "-m", "digest", "check", "--config", str(elsewhere / "nope.toml")],
                             cwd=elsewhere, capture_output=True, text=True, env=env, timeout=60)
    assert found.returncode == 1 and "newsletter.from_address" in found.stdout, found.stderr
    assert missing.returncode == 2 and f"{elsewhere / 'nope.toml'}: config file not found" in missing.stderr
    assert not (elsewhere / "digest.db").exists()
