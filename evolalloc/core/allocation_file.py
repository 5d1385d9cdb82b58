"""Allocation files: write atomically, read with one clear error naming the file and field.

Reading goes in three steps, each with its own kind of message:

1. the bytes: unreadable file, invalid JSON (with line and column);
2. the schema (``schema/allocation.schema.json``, JSON Schema draft 2020-12): format and
   version first, then missing, unknown and mistyped fields;
3. meaning: the budgets' shape against the stated geometry, layer granularity with unequal
   heads, and, when the caller knows its model, the geometry against that model.

Every problem raises ``UserError(message, source=path, field=json_path)``.
"""

from __future__ import annotations

import difflib
import json
import uuid
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jsonschema
import numpy as np

from evolalloc.core.allocation import FORMAT, FORMAT_VERSION, READABLE_VERSIONS, Allocation
from evolalloc.core.composition import is_method, methods
from evolalloc.core.errors import UserError
from evolalloc.core.fileio import write_atomic
from evolalloc.core.geometry import ModelGeometry
from evolalloc.core.methods import BASELINES
from searchspaces.registry import canonical_adapter
from searchspaces.score_prior import ADAPTER as SCORE_PRIOR
from searchspaces.score_prior import PRIOR_DECIMALS, recorded_prior

# Fields of the geometry an allocation must share with the model it is loaded for. dtype_bytes
# and max_positions are left out on purpose: a profile searched in fp32 applies unchanged in
# bf16, and the context length is a serving choice, not a property of the budgets.
_MATCHED_GEOMETRY = ("num_layers", "num_kv_heads", "num_query_heads", "head_dim", "windows")


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return resources.files("evolalloc.core").joinpath("schema/allocation.schema.json").read_text(encoding="utf-8")


def schema(also: tuple[str, ...] = ()) -> dict:
    """The JSON Schema of an allocation file, its ``provenance.method`` enum filled in from the
    baseline registry (``evolved`` + every registered rule and alias), so a new baseline file is a
    valid method without editing the schema. ``also``: composed methods' labels to accept too. A rule's
    old name is accepted too (an old file says ``gates``)."""
    data = json.loads(_schema_text())
    data["$defs"]["provenance"]["properties"]["method"]["enum"] = [*methods(), *BASELINES.aliases(), *also]
    return data


# -- writing -------------------------------------------------------------------------------


def _plain(value):
    # Provenance often carries numpy scalars (a fitness from an array); JSON wants Python ones.
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to an allocation file: {value!r}")


def allocation_to_dict(alloc: Allocation) -> dict:
    """The document as plain objects, keys in the order a reader wants them."""
    target = alloc.target
    version = 3 if alloc.decode is not None else 2 if alloc.geometry.windows is not None else 1
    document = {
        "format": FORMAT,
        "version": version,
        "model": alloc.model,
        "geometry": alloc.geometry.to_dict(),
        "scorer": alloc.scorer,
        "scorer_params": dict(alloc.scorer_params),
        "target": int(target) if float(target).is_integer() else target,
        "granularity": alloc.granularity,
        "budgets": alloc.budgets.tolist(),
        "provenance": _with_prior(alloc),
    }
    if alloc.decode is not None:  # absent for a prompt-only profile: its file is what it always was
        document["decode"] = alloc.decode.to_dict()
    return document


def _with_prior(alloc: Allocation) -> dict:
    """The provenance, with a hybrid's prior (``searchspaces.score_prior``) written from its budgets: the
    budgets are what runs, so the copy a reader sees is made when the file is, never carried stale."""
    provenance = dict(alloc.provenance)
    if canonical_adapter(provenance.get("adapter")) == SCORE_PRIOR:  # or its old name, gate_prior
        provenance["prior"] = recorded_prior(alloc.budgets)
    return provenance


def _check_prior(data: dict, source: str) -> None:
    """A hybrid's recorded prior must be the one its budgets encode (an edited prior would not run)."""
    provenance = data["provenance"]
    if canonical_adapter(provenance.get("adapter")) != SCORE_PRIOR or "prior" not in provenance:
        return
    try:
        stated = np.asarray(provenance["prior"], dtype=np.float64)
        expected = np.asarray(recorded_prior(data["budgets"]))
    except (TypeError, ValueError) as err:
        raise UserError(f"must be numbers [layers][KV heads] from budgets >= 1 ({err})", source=source,
                        field="$.provenance.prior") from None
    if stated.shape != expected.shape or not np.allclose(stated, expected, rtol=0, atol=10.0 ** -PRIOR_DECIMALS):
        raise UserError("does not match the budgets: the prior is log(budget / mean budget) of the budgets, which are "
                        "what runs; edit the budgets (the prior is rewritten from them)", source=source,
                        field="$.provenance.prior")


def allocation_to_json(alloc: Allocation) -> str:
    """Indented JSON with one budget row (layer) per line, so a diff shows which layer changed.

    Raises ``ValueError`` for NaN or infinity anywhere (they are not JSON).
    """
    data = allocation_to_dict(alloc)
    rows = data["budgets"]
    marker = f"@budgets-{uuid.uuid4().hex}@"
    data["budgets"] = marker
    text = json.dumps(data, indent=2, allow_nan=False, default=_plain)
    body = ",\n".join("    " + json.dumps(row) for row in rows)
    return text.replace(json.dumps(marker), "[\n" + body + "\n  ]") + "\n"


def save_allocation(alloc: Allocation, path: str | Path) -> Path:
    """Write via a temp file in the same folder and ``os.replace``: a crash leaves the old file
    or the new one, never half of one."""
    return write_atomic(path, allocation_to_json(alloc))  # serialised first: a bad value writes nothing



# -- reading -------------------------------------------------------------------------------


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string",
               "array": "an array", "object": "an object", "boolean": "a boolean", "null": "null"}


def _explain(error: jsonschema.ValidationError) -> tuple[str, str]:
    """(field, message) for one schema violation, in words a user can act on."""
    where, instance, rule = error.json_path, error.instance, error.validator_value
    if error.validator == "required":
        missing = next(name for name in rule if name not in instance)
        return f"{where}.{missing}", "missing required field"
    if error.validator == "additionalProperties":
        allowed = set(error.schema.get("properties", {}))
        unknown = sorted(key for key in instance if key not in allowed)[0]
        close = difflib.get_close_matches(unknown, allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{where}.{unknown}", f"unknown field ({hint}allowed: {', '.join(sorted(allowed))})"
    if error.validator == "type":
        wanted = " or ".join(_TYPE_NAMES[t] for t in ([rule] if isinstance(rule, str) else rule))
        return where, f"must be {wanted}, got {_json_type(instance)} ({_short(instance)})"
    if error.validator == "minimum":
        return where, f"must be >= {rule}, got {_short(instance)}"
    if error.validator == "exclusiveMinimum":
        return where, f"must be > {rule}, got {_short(instance)}"
    if error.validator == "enum":
        return where, f"must be one of {', '.join(map(json.dumps, rule))}, got {_short(instance)}"
    if error.validator == "minItems":
        return where, "must not be empty"
    return where, error.message


def _position(error: jsonschema.ValidationError) -> tuple:
    # Array indices compare as numbers so budgets[2][0] comes before budgets[2][1] and [10].
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in error.absolute_path)


def _first_error(data: dict) -> jsonschema.ValidationError | None:
    """The one violation to report: the first in the file (shallow fields before deep ones)."""
    provenance = data.get("provenance") if isinstance(data, dict) else None
    method = provenance.get("method") if isinstance(provenance, dict) else None
    composed = (method,) if isinstance(method, str) and method not in methods() and is_method(method) else ()
    errors = list(jsonschema.Draft202012Validator(schema(composed)).iter_errors(data))
    if not errors:
        return None
    return min(errors, key=lambda e: (len(e.absolute_path), _position(e)))


def _check_header(data: dict, source: str) -> None:
    # Format and version first: a file of another kind or version gets one message about
    # that, not a dozen about fields it was never meant to have.
    if data.get("format") != FORMAT:
        got = f"format is {_short(data['format'])}" if "format" in data else "no 'format' field"
        raise UserError(f"not an evolalloc allocation file ({got}; expected {FORMAT!r})", source=source,
                        field="$.format")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise UserError(f"version must be an integer, got {_short(version)}", source=source, field="$.version")
    if version > FORMAT_VERSION:
        raise UserError(
            f"written by a newer evolalloc (format version {version}); this one reads version {FORMAT_VERSION}",
            source=source, field="$.version",
        )
    if version not in READABLE_VERSIONS:
        raise UserError(f"unsupported format version {version} (this evolalloc reads {FORMAT_VERSION})",
                        source=source, field="$.version")


def _check_shape(data: dict, source: str) -> None:
    geometry, budgets = data["geometry"], data["budgets"]
    layers, heads = geometry["num_layers"], geometry["num_kv_heads"]
    if geometry["num_query_heads"] % heads:
        raise UserError(
            f"{geometry['num_query_heads']} query heads cannot be shared evenly by {heads} KV heads",
            source=source, field="$.geometry.num_query_heads",
        )
    if len(budgets) != layers:
        raise UserError(f"has {len(budgets)} rows (layers) but geometry.num_layers is {layers}",
                        source=source, field="$.budgets")
    for layer, row in enumerate(budgets):
        if len(row) != heads:
            raise UserError(f"has {len(row)} entries (KV heads) but geometry.num_kv_heads is {heads}",
                            source=source, field=f"$.budgets[{layer}]")
        if data["granularity"] == "layer" and len(set(row)) > 1:
            raise UserError(f"granularity is 'layer' but the KV heads of layer {layer} have different budgets {row}",
                            source=source, field=f"$.budgets[{layer}]")


def check_geometry(alloc: Allocation, expected: ModelGeometry, source: str) -> None:
    """``UserError`` if ``alloc`` was made for a model of another shape than ``expected``."""
    have = alloc.geometry
    if (have.num_layers, have.num_kv_heads) != (expected.num_layers, expected.num_kv_heads):
        raise UserError(
            f"made for {have.num_layers} layers × {have.num_kv_heads} KV heads, "
            f"this model has {expected.num_layers} × {expected.num_kv_heads}",
            source=source, field="$.geometry",
        )
    for name in _MATCHED_GEOMETRY:
        if getattr(have, name) != getattr(expected, name):
            raise UserError(
                f"made for {name} = {getattr(have, name)}, this model has {getattr(expected, name)}",
                source=source, field=f"$.geometry.{name}",
            )


def allocation_from_dict(data, *, source: str, expect_geometry: ModelGeometry | None = None) -> Allocation:
    """Validate a decoded document and build the ``Allocation``."""
    if not isinstance(data, dict):
        raise UserError(f"expected a JSON object at the top level, got {_json_type(data)}", source=source, field="$")
    _check_header(data, source)
    error = _first_error(data)
    if error is not None:
        field, message = _explain(error)
        raise UserError(message, source=source, field=field)
    _check_shape(data, source)
    _check_prior(data, source)
    alloc = Allocation(
        model=data["model"],
        geometry=ModelGeometry(**data["geometry"]),
        scorer=data["scorer"],
        scorer_params=data["scorer_params"],
        target=data["target"],
        granularity=data["granularity"],
        budgets=np.array(data["budgets"], dtype=np.int64),
        provenance=data["provenance"],
        decode=data.get("decode"),  # absent or null in a prompt-only file (every file before version 3)
    )
    if expect_geometry is not None:
        check_geometry(alloc, expect_geometry, source)
    return alloc


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_allocation(text: str, *, source: str = "<string>",
                     expect_geometry: ModelGeometry | None = None) -> Allocation:
    """Decode and validate JSON text; ``source`` names it in errors."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise UserError(f"not valid JSON: {err.msg}", source=source,
                        field=f"line {err.lineno}, column {err.colno}") from None
    except ValueError as err:  # NaN / Infinity, which Python's json would otherwise accept
        raise UserError(f"not valid JSON: {err}", source=source) from None
    return allocation_from_dict(data, source=source, expect_geometry=expect_geometry)


def load_allocation(path: str | Path, expect_geometry: ModelGeometry | None = None) -> Allocation:
    """Read and validate an allocation file."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no such file", source=source) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read: {err}", source=source) from None
    return parse_allocation(text, source=source, expect_geometry=expect_geometry)
