"""Signing up on the web: double opt-in, the topics a reader may tick, onboarding by rating papers."""
