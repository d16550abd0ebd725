"""The welcome page's ratings: `/welcome/<token>` (a dozen papers to mark, the marks shown) and
`/welcome/<token>/rate` (one mark, then back to the list).

The token is the reader's feedback token (what an email's "more / less like this" links carry, valid as long:
`web.link_days`), since a mark here is that same signal (`digest.signup.onboarding`). It works without JavaScript: each
paper's two buttons are a plain form whose POST records the mark and answers 303 back to the list, at the paper
just rated. A small script (`SCRIPT`, allowed by the pages' CSP) posts the same forms in the background and
marks the paper in place, so the reader stays where they are (on the confirmation's page, beside their digest);
where it cannot, the form posts as without it. A POST whose browser names another site is refused (403), as every
change is.
"""

from __future__ import annotations

from datetime import date
from urllib.parse import urlsplit

from flask import Blueprint, Response, abort, redirect, request

from digest.models import Links, Subscriber
from digest.numbers import whole
from digest.signup.onboarding import offered, rate
from digest.web.common import CSP, current, page
from digest.web.guard import same_site
from digest.web.public import _links, _token

blueprint = Blueprint("welcome", __name__)

CSP_WITH_SCRIPT = CSP + "; script-src 'self'; connect-src 'self'"  # the page's script, and its POSTs here
SCRIPT = """// Marks a paper without leaving the page; without this script each form posts and the list comes back.
(function () {
  if (!window.fetch || !window.URLSearchParams || !window.FormData) { return; }
  var status = document.getElementById("rated-count");
  function show(form, value) {
    Array.prototype.forEach.call(form.querySelectorAll("button"), function (button) {
      var on = button.value === value;
      button.setAttribute("aria-pressed", on ? "true" : "false");
      button.className = on ? "" : "secondary";
    });
    var noted = form.querySelector(".noted");
    if (!noted) { noted = document.createElement("span"); noted.className = "noted"; form.appendChild(noted); }
    noted.textContent = value === "more" ? "\u2713 More like this, noted" : "\u2713 Fewer like this, noted";
    var rated = document.querySelectorAll("form.pair button[aria-pressed=true]").length;
    var all = document.querySelectorAll("form.pair").length;
    if (status) { status.textContent = "You have rated " + rated + " of " + all + "."; }
  }
  function post(form, value) {  // as without the script: the form itself, with the button's value
    var field = document.createElement("input");
    field.type = "hidden"; field.name = "rating"; field.value = value;
    form.appendChild(field);
    form.submit();
  }
  Array.prototype.forEach.call(document.querySelectorAll("form.pair"), function (form) {
    form.addEventListener("submit", function (event) {
      var button = event.submitter;
      if (!button || !button.value) { return; }
      event.preventDefault();
      var body = new URLSearchParams(new FormData(form));
      body.append("rating", button.value);
      fetch(form.action, {method: "POST", body: body, credentials: "same-origin", redirect: "manual"})
        .then(function (response) {
          if (response.type === "opaqueredirect" || response.ok) { show(form, button.value); }
          else { post(form, button.value); }
        }, function () { post(form, button.value); });
    });
  });
})();
"""


def _reader(token: str) -> tuple[Subscriber, Links | None]:
    subject = _token("feedback", token)
    subscriber = current().store.subscribers_by_email([subject.email]).get(subject.email)
    if subscriber is None:
        abort(404)
    return subscriber, _links(subject)


@blueprint.get("/welcome.js")
def script() -> Response:
    return Response(SCRIPT, content_type="text/javascript; charset=utf-8")


@blueprint.get("/welcome/<token>")
def welcome(token: str) -> Response:
    """The papers to rate, each marked as the reader has rated it so far."""
    subscriber, links = _reader(token)
    html = page("welcome", subscriber=subscriber, confirmed=False, updated=False,
                preferences_url=links.preferences if links else None,
                view_url=urlsplit(links.view).path if links else None,
                choices=offered(current(), subscriber, date.today()), rate_url=f"{request.path}/rate",
                script_url=f"{request.path.rsplit('/welcome/', 1)[0]}/welcome.js")
    response = Response(html, content_type="text/html; charset=utf-8")
    response.headers["Content-Security-Policy"] = CSP_WITH_SCRIPT
    return response


@blueprint.post("/welcome/<token>/rate")
def rate_one(token: str) -> Response:
    """One mark ("more" or "less" on the form's paper), then back to the list at that paper."""
    subscriber, _ = _reader(token)
    if not same_site():
        abort(403)
    paper, rating = whole(request.form.get("paper", "")), request.form.get("rating", "")
    if paper is None or rating not in ("more", "less"):
        abort(400)
    if rate(current(), subscriber.email, paper, rating == "more") is None:
        abort(404)
    return redirect(f"{request.path.rsplit('/', 1)[0]}#paper-{paper}", 303)
