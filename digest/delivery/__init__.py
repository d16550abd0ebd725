"""Delivery: the due digests queued, claimed by workers, composed, signed and handed to SMTP or the outbox."""
