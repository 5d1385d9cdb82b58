"""The service's one door to the exporters (``evolalloc.export``).

Everything the service exports goes through ``export_profile`` and ``export_formats``, so a
change in how exporters are found (a named registry) is a change here only.
"""

from __future__ import annotations

from evolalloc.core.allocation import Allocation

# What each format's text is, for the Content-Type header (JSON unless an exporter says otherwise).
MEDIA_TYPES = {"json": "application/json", "kvpress": "application/json"}


def export_formats() -> list[str]:
    from evolalloc.export import exporters

    return exporters.names()


def export_profile(allocation: Allocation, fmt: str, *, context_length: int | None = None) -> tuple[str, str]:
    """``(text, media type)`` of ``allocation`` in format ``fmt``; ``UserError`` for an unknown format."""
    from evolalloc.export import export_text

    text = export_text(allocation, fmt, context_length=context_length)
    return text, MEDIA_TYPES.get(fmt, "application/json")
