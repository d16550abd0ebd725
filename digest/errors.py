"""Domain exceptions. Only the CLI turns them into messages and exit codes."""


class DigestError(Exception):
    """Base of every error the CLI reports as a message rather than a traceback."""


class ConfigError(DigestError):
    """A settings file is unreadable, names an unknown setting, or has a value of the wrong type."""


class ProfileError(DigestError):
    """A subscriber profile is invalid; the message names the file and line."""


class StoreError(DigestError):
    """The database cannot be opened or is not a paper-digest database."""


class DeliveryError(DigestError):
    """A transport could not hand a message over."""


class TemporaryFailure(DeliveryError):
    """A 4xx reply or a lost connection: worth trying again, later in the run or in the next one."""


class ConnectionTrouble(TemporaryFailure):
    """The connection broke or stalled mid-message (no reply within the deadline): the server, not the message.

    Several in a row trip the run's circuit breaker (`delivery.max_connection_failures`).
    """


class PermanentFailure(DeliveryError):
    """A 5xx reply: this message will not be accepted as it is.

    `bounce` is true when the reply is about the recipient's address (a hard bounce that counts
    towards suppressing it), false when it is about the message or the sender.
    """

    def __init__(self, reply: str, *, bounce: bool) -> None:
        super().__init__(reply)
        self.bounce = bounce


class TransportUnavailable(TemporaryFailure):
    """The server cannot be reached, secured or logged into: no digest can go out through it now.

    `retry` is false when trying again cannot help in this run (a refused password, a bad
    certificate, no STARTTLS offered), so the run stops at once rather than after the backoff.
    """

    def __init__(self, reason: str, *, retry: bool = True) -> None:
        super().__init__(reason)
        self.retry = retry


class UsageError(DigestError):
    """A command was asked for something that cannot be done (an unknown subscriber, a bad date)."""


class RenderError(DigestError):
    """A digest could not be rendered: a template is missing, broken or cannot be inlined."""


class FetchError(DigestError):
    """A source could not be fetched; says which URL, why, and after how many attempts."""

    def __init__(self, url: str, reason: str, attempts: int = 1, *, status: int | None = None) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.attempts = attempts
        self.status = status  # the HTTP status of a refusal (404, 403 …), None for any other failure
