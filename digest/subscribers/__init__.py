"""Subscribers: profile files, imported lists and their sync into the store, readers' libraries, their data."""
