"""Paper digest: personalised trending research papers in your inbox."""

__version__ = "0.1.0"
