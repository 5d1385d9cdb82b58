"""``/profiles``: the registry — list, fetch (expanded, exported), register a file made elsewhere."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse

from evolalloc.core.errors import UserError
from evolalloc.service.db import Profile
from evolalloc.service.jobs import JobError
from evolalloc.service.profiles import list_profiles, register_upload, render

router = APIRouter(tags=["profiles"])

ALLOCATION_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "description": "an evolalloc allocation file (format evolalloc.allocation)"}}}}}


@router.get("/profiles")
async def get_profiles(request: Request, model: str | None = None, task: str | None = None, scorer: str | None = None,
                 granularity: str | None = None):
    """Registered profiles, oldest first, filtered by any of model, task, scorer, granularity."""
    filters = {"model": model, "task": task, "scorer": scorer, "granularity": granularity}
    with request.app.state.service.sessions() as session:
        return {"profiles": [p.to_dict() for p in list_profiles(session, filters)]}


@router.get("/profiles/{profile_id}")
async def get_profile(request: Request, profile_id: int,
                budget: float | None = Query(None, gt=0, description="carry the profile to this average budget"),
                format: str | None = Query(None, description="an export format (default: the allocation JSON)"),
                context_length: int | None = Query(None, gt=0, description="prompt length, for ratio formats"),
                min_budget: int | None = Query(None, ge=0, description="budget floor when expanding"),
                download: bool = Query(False, description="ask the browser to save it as a file")):
    """The allocation JSON; ``?budget=`` expands it by EvolKV's proportional rule, ``?format=``
    exports it. The ``ETag`` comes from the content hash; ``If-None-Match`` gives a 304."""
    with request.app.state.service.sessions() as session:
        profile = session.get(Profile, profile_id)
        if profile is None:
            raise JobError(404, f"no profile {profile_id}")
        text, media_type, etag = render(profile, budget=budget, fmt=format, context_length=context_length,
                                        min_budget=min_budget)
    if etag in [tag.strip() for tag in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers={"ETag": etag})
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if download:
        label = f"c{budget:g}" if budget else f"c{profile.target:g}"
        headers["Content-Disposition"] = f'attachment; filename="profile-{profile.id}-{label}.{format or "json"}.json"'
    return Response(text, media_type=media_type, headers=headers)


@router.post("/profiles", status_code=201, openapi_extra=ALLOCATION_BODY)
async def post_profile(request: Request):
    """Register an allocation file made elsewhere, checked exactly as ``evolalloc`` loads one.
    201 with the new profile; 200 with the existing one if the same content is registered already."""
    body = await request.body()
    if not body.strip():
        raise UserError("the body is empty: send an allocation file (JSON)", source="allocation")
    with request.app.state.service.sessions.begin() as session:
        profile, created = register_upload(session, body)
        result = profile.to_dict()
    return JSONResponse(result, status_code=201 if created else 200)
