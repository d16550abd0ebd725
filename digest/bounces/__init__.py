"""Bounces and complaints: reports read from a mailbox or a provider's webhook, matched to digests, suppressions."""
