"""The trial store: every evaluation of the search is one trial of an Optuna study.

Default database: ``sqlite:///<run>/study.db``; any Optuna storage URL works (e.g. a shared
PostgreSQL on a cluster), and optuna-dashboard can show either. ``journal:<path>`` selects
Optuna's journal file storage instead: an append-only log, about 40x cheaper per trial than
SQLAlchemy (~30 ms per trial on SQLite here, which only matters for cheap evaluations such
as tests). The study maximises fitness.

A trial is written once, when its evaluation has finished (``study.add_trial``), as
COMPLETE (value = fitness) or FAIL (no value, ``error`` attribute). Writing finished trials
only means a killed run leaves no RUNNING trial behind to clean up, and "is it stored?" is
exactly "was it evaluated?". Each trial is keyed by ``(group, generation, candidate)`` (group -1:
the start's candidates, each with a ``label``, the method it is); on
resume the loop re-asks the interrupted generation and takes the candidates found here
instead of evaluating them again.

Trial parameters are the ratios of the group's units, named ``u0007`` for unit 7; the value
is the fitness. User attributes: ``group``, ``generation``, ``candidate``, ``task_score``,
``cache_score``, ``mean_budget``, ``group_mean_budget``, ``budgets`` (``[L][H]``), ``seconds``,
for a FAIL ``error`` and for a start's candidate ``label``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from evolalloc.core.errors import UserError

_KEYS = ("group", "generation", "candidate")
JOURNAL_PREFIX = "journal:"


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url``, connected and checked: ``journal:<path>`` is a journal file,
    anything else an RDB URL (see ``driver_url`` for PostgreSQL).

    A missing database driver or a database that cannot be reached is a ``UserError`` (field
    ``storage``) naming the URL without its password, and what to install or check.
    """
    if url.startswith(JOURNAL_PREFIX):
        from optuna.storages.journal import JournalFileBackend

        try:
            return optuna.storages.JournalStorage(JournalFileBackend(url[len(JOURNAL_PREFIX):]))
        except OSError as err:
            raise UserError(f"cannot open the journal file: {err}", field="storage") from None
    import sqlalchemy.exc

    shown = display_url(url)  # as the user wrote it
    url = driver_url(url)
    try:
        return optuna.storages.RDBStorage(url)
    except ImportError as err:
        module = getattr(err.__cause__, "name", None) or str(err.__cause__ or err)
        hint = " for PostgreSQL: pip install 'evolalloc[postgres]'" if url.startswith("postgresql+psycopg://") else ""
        raise UserError(f"no database driver for {shown} (missing module "
                        f"{module!r});{hint or ' install the driver the URL names'}",
                        field="storage") from None
    except sqlalchemy.exc.ArgumentError as err:
        raise UserError(f"not a usable database URL {shown}: {_first_line(err)}", field="storage") from None
    except sqlalchemy.exc.SQLAlchemyError as err:
        raise UserError(f"cannot open the database {shown}: {_first_line(getattr(err, 'orig', None) or err)}",
                        field="storage") from None


def driver_url(url: str) -> str:
    """PostgreSQL URLs as users write them (``postgresql://``, ``postgres://``) use psycopg 3,
    the driver of the ``evolalloc[postgres]`` extra; SQLAlchemy's default driver for a bare
    ``postgresql://`` differs between its versions (psycopg2 before 2.1). A URL naming its
    driver (``postgresql+psycopg2://``) is left alone."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    return url


def display_url(url: str) -> str:
    """``url`` with any password masked, for messages."""
    if url.startswith(JOURNAL_PREFIX):
        return url
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not parseable: show the scheme only, it may hold a password
        return url.split("://", 1)[0] + "://..."


def _first_line(err: object) -> str:
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def check_study_name_free(url: str, study_name: str) -> None:
    """Open the storage at ``url`` and refuse (``UserError``) if ``study_name`` is taken there."""
    storage = open_storage(url)
    try:
        storage.get_study_id_from_name(study_name)
    except KeyError:
        return
    finally:
        close_storage(storage)
    raise _duplicated(url, study_name)


def close_storage(storage) -> None:
    """Release an RDB storage's connections (a journal file needs nothing)."""
    storage = getattr(storage, "_backend", storage)  # optuna wraps an RDBStorage in a cache
    engine = getattr(storage, "engine", None)
    if engine is not None:
        engine.dispose()


def _duplicated(url: str, study_name: str) -> UserError:
    return UserError(f"study {study_name!r} already exists in {display_url(url)}; "
                     "resume that run or give this one another name (--name)",
                     field="study_name")


def unit_param(unit: int) -> str:
    return f"u{int(unit):04d}"


@dataclass
class TrialRecord:
    """One evaluated candidate, as stored.

    ``ratios`` are the searched ratios of the group's units (``[len(units)]``); ``budgets`` the
    whole decoded allocation ``[num_layers, num_kv_heads]``. ``mean_budget`` is the mean of
    ``budgets``; ``group_mean_budget`` the mean budget of the group's units; ``cache_score``
    and ``fitness`` are ``None`` for a FAIL.
    """

    group: int
    generation: int
    candidate: int
    units: list[int]
    ratios: list[float]
    budgets: list[list[int]]
    mean_budget: float
    group_mean_budget: float
    state: str  # "COMPLETE" or "FAIL"
    task_score: float | None = None
    cache_score: float | None = None
    fitness: float | None = None
    error: str | None = None
    seconds: float = 0.0
    number: int | None = None  # Optuna trial number, when read back from the study
    label: str | None = None  # a start's candidate: the method it is (``groupwise.START_GROUP``)

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.group, self.generation, self.candidate)

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETE"


class TrialStore:
    """One run's Optuna study, plus an index of its finished trials by key."""

    def __init__(self, study: optuna.Study, ratio_bounds: tuple[float, float]):
        self.study = study
        self.ratio_bounds = ratio_bounds
        self._index: dict[tuple[int, int, int], TrialRecord] = {}
        for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
            record = _record_from_trial(trial)
            if record is not None:
                self._index[record.key] = record

    @classmethod
    def create(cls, url: str, study_name: str, ratio_bounds: tuple[float, float], attrs: dict) -> "TrialStore":
        """A new study; refuses one that exists (a run never writes into another run's study)."""
        try:
            study = optuna.create_study(storage=open_storage(url), study_name=study_name, direction="maximize")
        except optuna.exceptions.DuplicatedStudyError:
            raise _duplicated(url, study_name) from None
        for key, value in attrs.items():
            study.set_user_attr(key, value)
        return cls(study, ratio_bounds)

    @classmethod
    def open(cls, url: str, study_name: str, ratio_bounds: tuple[float, float]) -> "TrialStore":
        """The existing study ``study_name`` (``UserError`` if there is none)."""
        try:
            study = optuna.load_study(storage=open_storage(url), study_name=study_name)
        except KeyError:
            raise UserError(f"no study {study_name!r} in {display_url(url)}: this search never started, "
                            "so there is nothing to resume", field="storage") from None
        return cls(study, ratio_bounds)

    def delete(self) -> None:
        """Remove this study from its storage (a start-up that failed after creating it)."""
        optuna.delete_study(study_name=self.study.study_name, storage=self.study._storage)
        self.close()

    def close(self) -> None:
        close_storage(self.study._storage)

    def get(self, group: int, generation: int, candidate: int) -> TrialRecord | None:
        return self._index.get((group, generation, candidate))

    def __len__(self) -> int:
        return len(self._index)

    def add(self, record: TrialRecord) -> TrialRecord:
        """Write one finished evaluation (``number`` stays ``None`` until ``reload``)."""
        if record.key in self._index:
            raise RuntimeError(f"trial {record.key} (group, generation, candidate) is already stored")
        lower, upper = self.ratio_bounds
        distribution = FloatDistribution(lower, upper)
        params = {unit_param(u): float(np.clip(r, lower, upper)) for u, r in zip(record.units, record.ratios)}
        # Units, ratios and fitness are not repeated here: they are the params and the value.
        # (Every attribute is one more SQL statement per trial.)
        attrs = {
            "group": record.group,
            "generation": record.generation,
            "candidate": record.candidate,
            "task_score": record.task_score,
            "cache_score": record.cache_score,
            "mean_budget": record.mean_budget,
            "group_mean_budget": record.group_mean_budget,
            "budgets": record.budgets,
            "seconds": record.seconds,
        }
        if record.error is not None:
            attrs["error"] = record.error
        if record.label is not None:
            attrs["label"] = record.label
        trial = optuna.trial.create_trial(
            state=TrialState.COMPLETE if record.ok else TrialState.FAIL,
            value=record.fitness if record.ok else None,
            params=params,
            distributions={name: distribution for name in params},
            user_attrs=attrs,
        )
        self.study.add_trial(trial)
        self._index[record.key] = record
        return record

    def reload(self) -> "TrialStore":
        """A fresh view of the database (records then carry their Optuna trial numbers)."""
        return TrialStore(self.study, self.ratio_bounds)

    def records(self) -> list[TrialRecord]:
        """All stored evaluations in search order (group, generation, candidate)."""
        return [self._index[key] for key in sorted(self._index)]


def _record_from_trial(trial: optuna.trial.FrozenTrial) -> TrialRecord | None:
    attrs = trial.user_attrs
    if not all(k in attrs for k in _KEYS):
        return None  # not written by the search loop (e.g. added by hand); ignore
    names = sorted(trial.params, key=lambda name: int(name[1:]))  # "u0007" -> unit 7
    complete = trial.state == TrialState.COMPLETE
    return TrialRecord(
        group=int(attrs["group"]),
        generation=int(attrs["generation"]),
        candidate=int(attrs["candidate"]),
        units=[int(name[1:]) for name in names],
        ratios=[float(trial.params[name]) for name in names],
        budgets=[[int(b) for b in row] for row in attrs["budgets"]],
        mean_budget=float(attrs["mean_budget"]),
        group_mean_budget=float(attrs["group_mean_budget"]),
        state="COMPLETE" if complete else "FAIL",
        task_score=attrs.get("task_score"),
        cache_score=attrs.get("cache_score"),
        fitness=float(trial.value) if complete else None,
        error=attrs.get("error"),
        seconds=float(attrs.get("seconds") or 0.0),
        number=trial.number,
        label=attrs.get("label"),
    )
