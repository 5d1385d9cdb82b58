"""The profile registry: allocations with what they were searched for, addressable by id.

A finished job registers each profile of its run folder (the target and every expansion), with
the held-out comparison rows at that budget; ``POST /profiles`` registers a file made elsewhere,
read by ``parse_allocation`` exactly as the CLI reads one. The stored document is the file's
text; its *content hash* (SHA-256 of the canonical JSON of the document) identifies it, gives
the ``ETag`` and makes registering the same document twice return the first registration.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import (
    allocation_to_dict,
    allocation_to_json,
    parse_allocation,
)
from evolalloc.core.errors import UserError
from evolalloc.service.db import Profile
from evolalloc.service.exporting import export_profile

FILTERS = ("model", "task", "scorer", "granularity")


def content_hash(allocation: Allocation) -> str:
    canonical = json.dumps(allocation_to_dict(allocation), sort_keys=True, separators=(",", ":"), default=float)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def register(session: Session, allocation: Allocation, *, source: str, job_id: int | None = None,
             comparison: list | None = None, min_budget: int = 1) -> tuple[Profile, bool]:
    """``(profile, created)``: an existing registration of the same content is returned as is."""
    digest = content_hash(allocation)
    existing = session.scalar(select(Profile).where(Profile.content_hash == digest))
    if existing is not None:
        return existing, False
    fitness = allocation.provenance.get("fitness")
    profile = Profile(
        content_hash=digest, model=allocation.model, task=allocation.provenance.get("task"),
        scorer=allocation.scorer, granularity=allocation.granularity, target=float(allocation.target),
        fitness=float(fitness) if isinstance(fitness, (int, float)) else None, min_budget=int(min_budget),
        comparison=comparison, job_id=job_id, source=source, document=allocation_to_json(allocation),
    )
    session.add(profile)
    session.flush()
    return profile, True


def register_upload(session: Session, body: bytes) -> tuple[Profile, bool]:
    """Validate an uploaded allocation file like ``evolalloc`` does, then register it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError("the body is not UTF-8 text", source="allocation") from None
    return register(session, parse_allocation(text, source="allocation"), source="upload")


def register_run(session: Session, run_dir: Path, job_id: int, min_budget: int = 1) -> list[Profile]:
    """Register every evolved profile of a finished run folder (at the budgets its ``run.json``
    names), with its comparison rows."""
    from evolalloc.config.run_folder import COMPARISON_FILE, allocation_filename, load_resolved

    rows = []
    comparison = run_dir / COMPARISON_FILE
    if comparison.exists():
        rows = json.loads(comparison.read_text(encoding="utf-8")).get("rows", [])
    profiles = []
    for budget in sorted(load_resolved(run_dir).budgets):
        path = run_dir / allocation_filename(budget)
        if not path.is_file():
            continue
        allocation = parse_allocation(path.read_text(encoding="utf-8"), source=str(path))
        at_budget = [row for row in rows if float(row["budget"]) == budget]
        profiles.append(register(session, allocation, source="job", job_id=job_id, comparison=at_budget,
                                 min_budget=min_budget)[0])
    return profiles


def list_profiles(session: Session, filters: dict[str, str | None]) -> list[Profile]:
    query = select(Profile).order_by(Profile.id)
    for name in FILTERS:
        value = filters.get(name)
        if value:
            query = query.where(getattr(Profile, name) == value)
    return list(session.scalars(query))


@lru_cache(maxsize=256)
def _parsed(content_hash: str, document: str) -> Allocation:
    """A registered document, validated once: documents never change under their hash."""
    return parse_allocation(document, source=f"profile {content_hash[:12]}")


@lru_cache(maxsize=1024)
def _variant(content_hash: str, document: str, floor: int, budget: float | None, fmt: str,
             context_length: int | None) -> tuple[str, str]:
    allocation = _parsed(content_hash, document)
    if budget is not None:
        try:
            allocation = allocation.expand(budget, min_budget=floor)
        except ValueError as err:
            raise UserError(str(err), field="budget") from None
    return export_profile(allocation, fmt, context_length=context_length)


def render(profile: Profile, *, budget: float | None, fmt: str | None, context_length: int | None,
           min_budget: int | None) -> tuple[str, str, str]:
    """``(text, media type, etag)`` of a profile, carried to ``budget`` and exported as ``fmt``.

    The plain document is returned byte for byte as registered; its ETag is the content hash.
    A variant's ETag is a hash of the content hash and the request's parameters.
    """
    if budget is None and fmt in (None, "json") and context_length is None:
        return profile.document, "application/json", f'"{profile.content_hash}"'
    floor = profile.min_budget if min_budget is None else min_budget
    text, media_type = _variant(profile.content_hash, profile.document, floor, budget, fmt or "json", context_length)
    key = json.dumps([profile.content_hash, budget, fmt or "json", context_length, min_budget])
    return text, media_type, f'"{hashlib.sha256(key.encode()).hexdigest()[:40]}"'
