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


class UsageError(DigestError):
    """A command was asked for something that cannot be done (an unknown subscriber, a bad date)."""


class RenderError(DigestError):
    """A digest could not be rendered: a template is missing, broken or cannot be inlined."""


class FetchError(DigestError):
    """A source could not be fetched; says which URL, why, and after how many attempts."""

    def __init__(self, url: str, reason: str, attempts: int = 1) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.attempts = attempts
