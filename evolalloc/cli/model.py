"""``evolalloc model check SPEC``: is this model one the eviction runtime runs exactly, what shape
is its cache, and what does one prompt's cache weigh — from its config, without loading weights."""

from __future__ import annotations

import click

from evolalloc.cli import main
from evolalloc.config.schema import DTYPES  # what a recipe's model.dtype may be (torch-free)
from evolalloc.core.errors import UserError


@main.group("model")
def model() -> None:
    """Check a model before a run: `model check SPEC`."""


@model.command("check")
@click.argument("spec")
@click.option("--context", "context", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Prompt length in tokens for the cache-size line.")
@click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True,
              help="What the model and its cache compute in: bfloat16 on a GPU, float32 on a CPU.")
def check(spec: str, context: int, dtype: str) -> None:
    """Print SPEC's architecture, its geometry per layer type, whether the eviction runtime
    supports its attention (and why not), and its KV cache per prompt at --context tokens.

    SPEC: bundled:<name>, a local HF model folder, or a local .gguf file. Only the config is read.
    Exit status 0 and "supported", or 2 and the one-line reason.
    """
    from evolalloc.runtime.model_card import model_card

    card = model_card(spec, dtype)
    for line in describe(card, context):
        click.echo(line)
    if not card.support.supported:
        raise UserError(f"unsupported model {card.model_type!r}: {card.support.reason}", source=spec)
    click.echo("supported")


def describe(card, context: int) -> list[str]:
    """The report's lines (all but the verdict)."""
    inner = f" (language model {card.text_type})" if card.text_type != card.model_type else ""
    classes = f" — {', '.join(card.classes)}" if card.classes else ""
    lines = [f"model: {card.spec}", f"architecture: {card.model_type}{inner}{classes}"]
    if card.terms:
        lines.append(f"license: {card.terms}")
    if card.groups:
        layers = sum(len(g.layers) for g in card.groups)
        lines.append(f"layers: {layers}   positions: {card.max_positions or 'not given'}   "
                     f"dtype: {card.dtype} ({card.dtype_bytes} bytes)")
        lines += _group_table(card.groups)
    features = ", ".join(card.support.features) or "none"
    lines.append(f"attention features: {features}")
    if card.probe is not None:
        lines.append(f"attention probe (a 4-token forward on the meta device, no weights): {_probe_text(card.probe)}")
    if card.chat_template is not None:
        lines.append(
            "chat template: "
            f"{'yes (prompt_style: chat can be used)' if card.chat_template else 'none (use prompt_style: raw)'}"
        )
    if card.geometry is not None:
        lines += _memory_lines(card, context)
    return lines


def _probe_text(probe) -> str:
    if not probe.ran:
        return f"could not run without weights ({probe.note}); load_model probes the loaded model"
    return "refused" if probe.refusal else "every layer calls evolalloc's attention with arguments it implements"


def _group_table(groups) -> list[str]:
    header = ("layer type", "layers", "query heads", "KV heads", "head dim", "window")
    rows = [(g.layer_type, str(len(g.layers)), str(g.query_heads), str(g.kv_heads), str(g.head_dim),
             str(g.window) if g.window is not None else "-") for g in groups]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def fmt(row):
        return "  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                for i, (cell, w) in enumerate(zip(row, widths)))

    out = [fmt(header), *map(fmt, rows)]
    if len(groups) > 1:
        out += [f"  {g.layer_type}: layers {_spans(g.layers)}" for g in groups]
    return out


def _spans(layers: tuple[int, ...], most: int = 8) -> str:
    """``0-4, 6-10, 12`` (the first ``most`` runs of consecutive layers)."""
    runs: list[list[int]] = []
    for layer in layers:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    text = [f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs[:most]]
    return ", ".join(text) + (f", ... ({len(runs) - most} more)" if len(runs) > most else "")


def _memory_lines(card, context: int) -> list[str]:
    geometry = card.geometry
    lines = [f"KV cache per prompt (keys and values; a sliding layer holds at most its window) in {card.dtype}:",
             f"  at {context} tokens: {_bytes(card.kv_cache_bytes(context))}"]
    limit = geometry.max_positions
    if limit and limit != context:
        lines.append(f"  at {limit} tokens (the model's positions): {_bytes(card.kv_cache_bytes(limit))}")
    if limit and context > limit:
        lines.append(f"note: --context {context} is beyond the model's "
                     f"{limit} positions: a run at that length is refused")
    return lines


def _bytes(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit} ({count:,} bytes)"
    return f"{count:,} bytes"
