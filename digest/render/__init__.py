"""Rendering: a Digest becomes subject, preheader, HTML (CSS inlined at load) and plain text through Jinja2."""
