"""Every number a web form or query carries, sent as an attacker would: other scripts' digits ("²", "٣", "𝟓"),
signs, fractions, separators, huge values, blanks. Each route answers 4xx (or its own "not done" page), never a
500, and nothing is paused, marked or forgotten on the strength of a number that is not one."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup

from digest.numbers import MAX_DIGITS

from ..conftest import DAY
from ..web_server import OPERATOR, Server
from .test_public import app  # noqa: F401 (the example subscribers, seeds ingested; conftest's `web` serves it)

ADA = "ada@example.org"
NOT_NUMBERS = ["²", "٣", "𝟓", "５", "7²", "+7", "-7", "7.0", "1e1", "1_4", "0x7", " ", "", "9" * (MAX_DIGITS + 1),
               "9" * 5000, "7\x00", "Ⅶ"]


def admin_form(server: Server, button: str) -> tuple[str, dict[str, str]]:
    page = server.client.get("/admin/subscriber", params={"email": ADA, "date": DAY.isoformat()}, auth=OPERATOR)
    assert page.status_code == 200, page.text
    form = BeautifulSoup(page.text, "html.parser").find("button", string=button).find_parent("form")
    return form["action"], {i["name"]: i.get("value", "") for i in form.find_all(["input", "select"])}


@pytest.mark.slow
def test_numbers_that_are_not_numbers_get_4xx_and_change_nothing(web):
    store = web.app.store
    links = web.app.links(ADA)
    preferences = web.path(links.preferences)
    rate = f"/welcome/{urlsplit(links.feedback).path.rsplit('/', 1)[1]}/rate"
    interests = preferences.replace("/preferences/", "/interests/")
    origin = {"Origin": web.base}
    action, fields = admin_form(web, "Pause")
    before = store.feedback_by_subscriber(ADA)
    for text in NOT_NUMBERS:
        answers = {
            "preferences pause": web.client.post(preferences, data={"do": "pause", "days": text}, headers=origin),
            "admin page": web.client.get("/admin/", params={"page": text}, auth=OPERATOR),
            "admin size": web.client.get("/admin/", params={"size": text}, auth=OPERATOR),
            "admin pause": web.client.post(action, data={**fields, "days": text}, auth=OPERATOR, headers=origin),
            "welcome rate": web.client.post(rate, data={"paper": text, "rating": "more"}, headers=origin),
            "interests unmark": web.client.post(interests, data={"do": "unmark", "paper": text}, headers=origin),
        }
        for surface, response in answers.items():
            assert response.status_code < 500, (surface, text, response.status_code)
            if text.strip() and surface.startswith(("admin", "welcome", "interests")):  # a blank is the default
                assert 400 <= response.status_code < 500, (surface, text, response.status_code)
        assert (store.preference(ADA) is None or store.preference(ADA).paused_until is None), text
        assert store.feedback_by_subscriber(ADA) == before, text
    # and the same forms with a real number still work
    assert web.client.post(preferences, data={"do": "pause", "days": "7"}, headers=origin).status_code == 200
    assert store.preference(ADA).paused_until is not None
