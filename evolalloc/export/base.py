"""The exporter interface and the two calls every caller uses: text for stdout, files on disk.

An exporter renders one allocation into one main file and, for some formats, sidecar files
written beside it (``curve`` writes ``NAME.npy`` and ``NAME.json``). Options (a context length,
a list of budgets) are constructor parameters, so ``exporters.create(name, **options)`` checks
their names against the format and a wrong one is a ``UserError``, not a silent default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evolalloc.core.allocation import Allocation
from evolalloc.core.errors import UserError
from evolalloc.registry import Registry, RegistryError


@dataclass
class Rendered:
    """What an exporter produces: ``main`` (text or bytes) and ``sidecars`` ``{suffix: content}``.

    Sidecars are written to the main path with its suffix replaced by the sidecar's suffix.
    ``text`` is set when the whole export is one text document that can go to stdout.
    """

    main: str | bytes
    suffix: str
    sidecars: dict[str, str | bytes] = field(default_factory=dict)

    @property
    def text(self) -> str | None:
        return self.main if isinstance(self.main, str) and not self.sidecars else None


class Exporter:
    """Base class: subclasses set ``suffix`` and implement ``render(allocation)``.

    ``check(allocation)`` raises ``UserError`` (field ``format``) for a profile the target tool
    cannot express; ``render`` calls it first.
    """

    name: str = ""
    suffix: str = ".json"
    #: The format holds one fixed budget per (layer, head) for every input. An allocation whose method
    #: picks budgets per input (``core.composition.allocation_adapter``) is refused: see ``check_static``.
    static: bool = True
    #: The format holds a profile's budgets while decoding too (``Allocation.decode``). A decode-time profile
    #: is refused by a format that applies budgets to the prompt only: see ``check_decode``.
    holds_decode: bool = False

    def check(self, allocation: Allocation) -> None:
        """Refuse what the target cannot express (default: everything can)."""

    def render(self, allocation: Allocation) -> Rendered:
        raise NotImplementedError

    def refuse(self, reason: str) -> UserError:
        return UserError(f"cannot export to {self.name}: {reason}", field="format")


def check_static(exporter: Exporter, allocation: Allocation, source: str | None = None) -> None:
    """Refuse (``UserError`` naming the file and the provenance field) a static export of an allocation
    whose budgets the runtime moves per input: global-topk's one top-k over every head, AdaKV's and
    CAKE's per-prompt shares, the hybrid's prior under the gates' top-k. Decided (issue 21): refuse
    rather than write the stored budgets, which are only the total (global-topk) or a prior (hybrid) and
    would run as another, untested method; the json file keeps the adapter and runs as evaluated."""
    from evolalloc.core.composition import allocation_adapter, is_method

    adapter = allocation_adapter(allocation)
    if not exporter.static or adapter is None:
        return
    method = allocation.provenance.get("method")
    field = "$.provenance.method" if method != "evolved" and is_method(method) else "$.provenance.adapter"
    what = f"method {method!r}" if field.endswith("method") else f"this profile (adapter {adapter[0]!r})"
    raise UserError(f"cannot export to {exporter.name}: {what} picks its budgets per input with the {adapter[0]!r} "
                    f"adapter, which a {exporter.name} file (one fixed budget per head) cannot hold; ship the json "
                    "file and run it with evolalloc (evaluate, generate)", source=source, field=field)


def check_decode(exporter: Exporter, allocation: Allocation, source: str | None = None) -> None:
    """Refuse (``UserError`` naming the file and ``$.decode``) a profile searched with its budgets held while
    decoding in a format that applies budgets to the prompt only: the serving stack would let the cache
    grow with the answer, which is not what was searched."""
    if allocation.decode is None or exporter.holds_decode:
        return
    raise UserError(f"cannot export to {exporter.name}: this profile holds its budgets while decoding (every "
                    f"{allocation.decode.interval} generated tokens), and a {exporter.name} file applies them to "
                    "the prompt only; ship the json file and run it with evolalloc (generate --allocation)",
                    source=source, field="$.decode")


# The formats (re-exported as ``evolalloc.export.exporters``); here, next to the base class, so that
# ``exporter_for`` needs no import of the package that imports this module.
exporters: Registry = Registry(
    "export format",
    base=Exporter,
    package="evolalloc.export",  # a new format is one file here; the lazy lines list names without imports
    lazy={
        "json": "evolalloc.export.json_format",
        "kvpress": "evolalloc.export.kvpress",
        "kvpress-decoding": "evolalloc.export.kvpress_decoding",
        "trtllm": "evolalloc.export.trtllm",
        "curve": "evolalloc.export.curve",
        "headkv": "evolalloc.export.headkv",
        "lukv": "evolalloc.export.lukv",
    },
)


def register_exporter(name: str, *, description: str = ""):
    """Class decorator: register an ``Exporter`` subclass as format ``name``."""
    return exporters.register(name, description=description)


def exporter_for(fmt: str, **options) -> Exporter:
    """Build exporter ``fmt`` with ``options`` (those left ``None`` are dropped).

    An unknown format or an option the format does not take is a ``UserError``.
    """
    given = {k: v for k, v in options.items() if v is not None}
    try:
        return exporters.create(fmt, **given)
    except RegistryError as err:
        raise UserError(str(err), field="format") from None
    except ValueError as err:  # an option the format takes, with a bad value
        raise UserError(str(err), field="format") from None


def _rendered(allocation: Allocation, fmt: str, source: str | None, options: dict) -> Rendered:
    exporter = exporter_for(fmt, **options)
    check_static(exporter, allocation, source)
    check_decode(exporter, allocation, source)
    return exporter.render(allocation)


def export_text(allocation: Allocation, fmt: str, *, source: str | None = None, **options) -> str:
    """The export as one text document (``UserError`` for formats that write several files, or for a
    per-input method in a static format; ``source`` names the allocation's file in that line)."""
    rendered = _rendered(allocation, fmt, source, options)
    if rendered.text is None:
        raise UserError(f"format {fmt!r} writes several files (or binary data); give an output path with -o",
                        field="output")
    return rendered.text


def export_allocation(allocation: Allocation, fmt: str, path: str | Path, *, source: str | None = None,
                      **options) -> Path:
    """Render and write the export atomically: the main file at ``path``, sidecars beside it (nothing
    written when it is refused)."""
    from evolalloc.core.fileio import write_atomic

    rendered = _rendered(allocation, fmt, source, options)
    path = Path(path)
    for suffix, content in rendered.sidecars.items():
        write_atomic(path.with_suffix(suffix), content)
    return write_atomic(path, rendered.main)
