"""One database, one runs dir: a service refuses a database another runs dir's service uses.

Jobs live in the database but run in a runs dir. Two services with different runs dirs on one
``--db`` would each see the other's running jobs as orphans of a dead service and launch them
again in their own folder. So the database records the runs dir it serves (one row); a service
with another runs dir refuses to start, naming it. One service per runs dir is the runs dir's
lock (``app.open_service``), so a restart with the same runs dir is always allowed.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from evolalloc.core.errors import UserError
from evolalloc.service.db import Base, utcnow


class DatabaseClaim(Base):
    __tablename__ = "service_claim"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1
    runs_dir: Mapped[str] = mapped_column(Text)
    claimed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


def claim_database(sessions, runs_dir: str, db_option: str = "--db") -> None:
    """Record ``runs_dir`` as this database's, or ``UserError`` if it serves another one."""
    with sessions.begin() as session:
        row = session.get(DatabaseClaim, 1)
        if row is None:
            session.add(DatabaseClaim(id=1, runs_dir=runs_dir))
        elif row.runs_dir != runs_dir:
            raise UserError(f"this database holds the jobs of the service on runs dir {row.runs_dir}; a second "
                            "service would take over its running jobs: start with that --runs-dir, or give this "
                            "one its own database", field=db_option)
