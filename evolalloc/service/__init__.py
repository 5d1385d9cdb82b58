"""``evolalloc serve``: search jobs, a profile registry and a web page over HTTP.

A thin layer over the pipeline (docs/architecture.md, row 9 of the layers; docs/service.md):

- ``app``        the FastAPI application: routes, error handlers, the static page;
- ``db``         the jobs and profiles tables (SQLAlchemy; SQLite by default, any URL);
- ``recipes``    a request body -> a validated recipe, exactly as the CLI checks it;
- ``validator``  a helper process that runs the checks needing torch (scorer names);
- ``jobs``       the scheduler: at most ``max_jobs`` worker processes, recovery after a kill, the
                 wall-time limit, each job's phase;
- ``job_limits`` the operator's limits on a job's size, checked at submission, and its plan (evaluations,
                 an estimated duration);
- ``job_queue``  the bounded queue (per service, per token): 429 with ``Retry-After``;
- ``worker``     ``python -m evolalloc.service.worker``: one job's pipeline in its own process;
- ``progress``   evaluations done / planned and best fitness, read from a run's trial store;
- ``profiles``   the profile registry: register, list, expand, export;
- ``security``   bind-address rule, bearer token, request-size limit.

The HTTP process never imports torch: the model only ever lives in worker processes.
"""
