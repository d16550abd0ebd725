"""The composition root: every part one command needs, built once from the settings, and closed together.

Nothing here does the work: `daily` runs the day (fetch → sync → due → queue → compose → deliver) with
these parts, the web pages (`web`) and the benchmarks get the parts they use, and each part is entered
through its own class:

    store      digest.store.Store            every table, one repository per concern
    ingest     sources.ingest.Ingest         files and folders of papers into the store
    analysis   select.analysis.Analysis      term statistics and the text model's embeddings, made as things come in
    profiles   subscribers.roster.Profiles  profile files synced into the store; subscribers by address or slot
    composer   compose.Composer              a date's pool; each reader's digest selected, rendered, built
    mailer     delivery.mailer.Mailer        the transport, DKIM and the delivery policies
    links      tokens.LinkMaker              the signed links of a reader's emails
"""

from __future__ import annotations

import os
from dataclasses import fields

from digest.compose import Composer, Window
from digest.config import Config
from digest.delivery.dispatch import Senders, journal_folder
from digest.delivery.handover import Transport
from digest.delivery.mailer import Mailer
from digest.render.renderer import Renderer
from digest.select import SelectSettings
from digest.select.analysis import Analysis
from digest.select.dense import DenseEmbedder
from digest.select.scores import ALLOCATIONS
from digest.sources.ingest import Ingest
from digest.store import Store
from digest.subscribers.roster import Profiles
from digest.tokens import LinkMaker, Signer

SELECT_KEYS = [f.name for f in fields(SelectSettings)]


class App:
    """The parts of one command, opened from the settings (`transport` and `workers` override them, for tests and
    `--workers`)."""

    def __init__(self, config: Config, *, transport: Transport | None = None, workers: int | None = None) -> None:
        self.config = config
        self.workers = workers or config.delivery.workers
        self.store = Store(config.store.url, durable_sends=config.store.durable_sends)
        self.renderer = Renderer([config.render.templates] if config.render.templates else [])
        self.newsletter = config.newsletter_info
        self.signer = Signer(os.environ.get(config.newsletter.secret_env) or self.store.secret())
        self.links = LinkMaker(self.signer, self.newsletter.base_url, self.newsletter.unsubscribe_mailto)
        settings = SelectSettings(**{k: float(getattr(config.select, k)) for k in SELECT_KEYS if k != "allocation"},
                                  allocation=ALLOCATIONS[config.select.allocation])
        # the text model is loaded when first used
        self.dense = DenseEmbedder(self.store, progress=True) if settings.text_model else None
        self.analysis = Analysis(self.store, self.dense)
        self.ingest = Ingest(self.store, self.analysis)
        self.profiles = Profiles(self.store, config.subscribers.dir, on_stored=self.analysis.interests)
        s = config.select
        window = Window(s.window_days, s.max_age_days, s.trending_again, s.stored_matches, config.delivery.quiet_days)
        self.composer = Composer(self.store, self.analysis, settings, window, renderer=self.renderer,
                                 newsletter=self.newsletter, links=self.links, message_key=self.signer.message_key)
        self.mailer = Mailer(config, transport)

    @property
    def settings(self) -> SelectSettings:
        """The ranking's settings (`select.*`); replacing them (a test, a benchmark) changes what the composer ranks
        with."""
        return self.composer.settings

    @settings.setter
    def settings(self, value: SelectSettings) -> None:
        self.composer.settings = value

    def senders(self) -> Senders:
        """What a date's senders share (the sent journal beside a SQLite store, else beside the settings)."""
        return Senders(self.store, self.mailer, journal_folder(self.store, self.config.base), self.workers)

    def close(self) -> None:
        self.mailer.close()
        self.store.close()
