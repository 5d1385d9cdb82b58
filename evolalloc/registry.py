"""One registry of named plugins, used for every open vocabulary in evolalloc.

Scorers, tasks, metrics, optimizers, search spaces, engines, baselines and export formats are each
a ``Registry``: a plugin is one small file whose class or function carries a decorator, and a
recipe names it. This module is the bottom floor: it imports nothing of evolalloc (and
``evolalloc/__init__`` imports nothing either), so the leaf packages ``fitness`` and
``searchspaces`` can use it too.

>>> scorers = Registry("scorer")
>>> @scorers.register("knorm", query_free=True)
... class KNorm:
...     pass
>>> scorers.get("knorm").name, scorers.info("knorm")["query_free"]
('knorm', True)
>>> scorers.get("knrom")
Traceback (most recent call last):
...
evolalloc.registry.UnknownNameError: unknown scorer 'knrom' (did you mean 'knorm'?); valid names: knorm

**Lazy entries.** ``Registry(kind, lazy={"name": "package.module"})`` lists ``name`` without
importing anything; the first ``get("name")`` imports ``package.module``, whose decorator then
registers it. So ``--help``, recipe checks and name listings stay instant even when a plugin
imports torch or Ray.

**Discovered entries.** ``Registry(kind, package="pkg.plugins")`` also finds a plugin file that no
``lazy`` line names: asking for a name nobody registered (or ``load_all()``) first imports every
public module of ``pkg.plugins`` once. So adding a plugin is one new file; a ``lazy`` line only
makes the name listed before anything is imported.

**Old names.** ``Registry(kind, aliases={"old": "new"})``: a name an entry was known by before it was
renamed still finds it (``get``, ``check_name``, ``in``, ``create``), so old recipes and files keep
loading; ``names()``, listings and errors give only the current names. ``canonical("old")`` is
``"new"``: compare names through it, never as written.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

__all__ = ["Registry", "RegistryError", "UnknownNameError", "DuplicateNameError", "BadParametersError"]

T = TypeVar("T")


class RegistryError(ValueError):
    """Base of every registry error (a ``ValueError``: a bad name or parameter is bad input)."""


class UnknownNameError(RegistryError, LookupError):
    """A name nobody registered. The message has the closest name and the valid ones (``aliases``: old
    names, ``{old: current}``, matched too and suggested by their current name)."""

    def __init__(self, kind: str, name: object, valid: list[str], aliases: Mapping[str, str] | None = None):
        self.kind, self.name, self.valid = kind, name, list(valid)
        aliases = dict(aliases or {})
        close = difflib.get_close_matches(str(name), [*self.valid, *aliases], n=1)
        hint = f" (did you mean {aliases.get(close[0], close[0])!r}?)" if close else ""
        listing = ", ".join(self.valid) or "(none registered)"
        super().__init__(f"unknown {kind} {name!r}{hint}; valid names: {listing}")


class DuplicateNameError(RegistryError):
    """A second, different object registered under a name already taken."""


class BadParametersError(RegistryError):
    """``create(name, **params)`` with a parameter the entry does not take."""


def _same_definition(a: object, b: object) -> bool:
    # A module imported twice (importlib.reload, pytest's rootdir juggling) registers the "same"
    # class again: accept that, refuse a genuinely different object under the same name.
    return a is b or (
        getattr(a, "__module__", None) == getattr(b, "__module__", None)
        and getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
    )


class Registry(Generic[T]):
    """Named entries of one kind (``"scorer"``, ``"task"``, ...), registered by decorator.

    ``register(name, **info)`` returns a decorator; ``info`` is free-form metadata a caller can
    read back without building the entry (``info(name)``), e.g. a scorer's ``query_free`` or a
    baseline's granularity. A registered class gets a ``name`` attribute set to its name.
    """

    def __init__(self, kind: str, *, base: type | None = None, lazy: Mapping[str, str] | None = None,
                 package: str | None = None, unknown_error: type[UnknownNameError] | None = None,
                 aliases: Mapping[str, str] | None = None):
        self.kind = kind
        self.base = base
        self.package = package
        # A leaf package may want its own subclass (e.g. fitness's, which is also a FitnessError).
        self.unknown_error = unknown_error or UnknownNameError
        self._entries: dict[str, T] = {}
        self._info: dict[str, dict[str, Any]] = {}
        self._lazy: dict[str, str] = dict(lazy or {})
        self._aliases: dict[str, str] = dict(aliases or {})  # old name -> current name
        self._discovered = package is None

    # -- registering ------------------------------------------------------------------------

    def register(self, name: str | None = None, **info: Any) -> Callable[[T], T]:
        """Decorator: register a class or function as ``name`` (default: its ``name`` attribute).

        Every plugin kind exposes this as ``register_<kind>("name")``; the name is always given
        there, so a plugin's name is written once, on its decorator.
        """
        if name is not None and not isinstance(name, str):
            # ``@register_scorer`` written without its name hands the class in as the name.
            raise TypeError(f"register a {self.kind} with its name, e.g. @register_...(\"name\"); got {name!r}")

        def decorate(obj: T) -> T:
            key = name if name is not None else getattr(obj, "name", None)
            if not isinstance(key, str) or not key:
                raise TypeError(f"a {self.kind} needs a non-empty string name, got {key!r} for {obj!r}")
            if self.base is not None and not (isinstance(obj, type) and issubclass(obj, self.base)):
                raise TypeError(f"{self.kind} {key!r} must be a subclass of {self.base.__name__}, got {obj!r}")
            if key in self._aliases:
                raise DuplicateNameError(f"{self.kind} {key!r} is the old name of {self._aliases[key]!r}")
            existing = self._entries.get(key)
            if existing is not None and not _same_definition(existing, obj):
                raise DuplicateNameError(
                    f"{self.kind} {key!r} is already registered (by {getattr(existing, '__qualname__', existing)!s}); "
                    f"registered: {', '.join(self.names())}"
                )
            if isinstance(obj, type):
                obj.name = key
            self._entries[key] = obj
            self._info[key] = dict(info)
            return obj

        return decorate

    def add(self, name: str, obj: T, **info: Any) -> T:
        """Register ``obj`` as ``name`` without a decorator (for objects built at run time)."""
        return self.register(name, **info)(obj)

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test's temporary plugin); unknown names are an ``UnknownNameError``."""
        if name not in self._entries and name not in self._lazy:
            raise self.unknown_error(self.kind, name, self.names(), self._aliases)
        self._entries.pop(name, None)
        self._info.pop(name, None)
        self._lazy.pop(name, None)

    # -- looking up -------------------------------------------------------------------------

    def _load(self, name: str) -> None:
        module = self._lazy.get(name)
        if module is not None and name not in self._entries:
            importlib.import_module(module)
            if name not in self._entries:
                raise RegistryError(f"{self.kind} {name!r}: importing {module} did not register it")

    def discover(self) -> None:
        """Import every public module of ``package`` once (their decorators register them)."""
        if self._discovered:
            return
        self._discovered = True
        root = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(getattr(root, "__path__", [])):
            if not module.name.startswith("_"):
                importlib.import_module(f"{self.package}.{module.name}")

    def canonical(self, name: str) -> str:
        """The current name of ``name``: itself, unless it is an old name (nothing is checked)."""
        return self._aliases.get(name, name) if isinstance(name, str) else name

    def aliases(self) -> dict[str, str]:
        """``{old name: current name}``."""
        return dict(self._aliases)

    def get(self, name: str) -> T:
        """The entry called ``name`` (or once called it); ``UnknownNameError`` (with did-you-mean) if none."""
        name = self.canonical(name)
        if isinstance(name, str) and name not in self._entries and name not in self._lazy:
            self.discover()  # a plugin file no lazy line names
        if not isinstance(name, str) or (name not in self._entries and name not in self._lazy):
            raise self.unknown_error(self.kind, name, self.names(), self._aliases)
        self._load(name)
        return self._entries[name]

    def check_name(self, name: str) -> None:
        """``UnknownNameError`` unless ``name`` is known; a lazy entry is not imported."""
        name = self.canonical(name)
        if isinstance(name, str) and name in self:
            return
        self.discover()
        if not isinstance(name, str) or name not in self:
            raise self.unknown_error(self.kind, name, self.names(), self._aliases)

    def info(self, name: str) -> dict[str, Any]:
        """The metadata given at registration (loads a lazy entry)."""
        self.get(name)
        return dict(self._info[self.canonical(name)])

    def names(self) -> list[str]:
        """Every registered or lazily known name, sorted (current names only); nothing is imported."""
        return sorted(set(self._entries) | set(self._lazy))

    def load_all(self) -> dict[str, T]:
        """Import every lazy entry and discover the package's files; ``{name: entry}``."""
        self.discover()
        return {name: self.get(name) for name in self.names()}

    def __contains__(self, name: object) -> bool:
        name = self.canonical(name)
        return name in self._entries or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()})"

    # -- building ---------------------------------------------------------------------------

    def parameters(self, name: str) -> list[str]:
        """The keyword parameters ``create(name, ...)`` accepts (from the entry's signature)."""
        obj = self.get(name)
        target = obj.__init__ if isinstance(obj, type) else obj
        params = list(inspect.signature(target).parameters.values())
        return [p.name for p in params if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]

    def create(self, name: str, /, *args: Any, **params: Any) -> Any:
        """Build entry ``name`` with ``params``; an unknown parameter is a ``BadParametersError``.

        Positional ``args`` are the caller's own (e.g. a geometry); ``params`` come from the user,
        so their names are checked against the entry's keyword parameters first.
        """
        obj = self.get(name)
        target = obj.__init__ if isinstance(obj, type) else obj
        signature = inspect.signature(target)
        # A class without its own __init__ has object's (*args, **kwargs), which takes nothing at all.
        takes_any = target is not object.__init__ and any(p.kind is p.VAR_KEYWORD
                                                          for p in signature.parameters.values())
        if not takes_any:
            valid = self.parameters(name)
            unknown = sorted(set(params) - set(valid))
            if unknown:
                raise BadParametersError(
                    f"{self.kind} {name!r} has no parameter {', '.join(map(repr, unknown))}; "
                    f"valid parameters: {', '.join(valid) or '(none)'}"
                )
        try:  # check the call before making it, so a TypeError inside the entry stays a bug
            signature.bind(*((None,) if isinstance(obj, type) else ()), *args, **params)
        except TypeError as err:  # a required parameter missing, or too many positional ones
            raise BadParametersError(f"{self.kind} {name!r}: {err}") from None
        return obj(*args, **params)
