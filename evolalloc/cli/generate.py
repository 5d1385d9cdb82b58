"""``evolalloc generate``: run prompts from a file with a budget profile, print the answers.

The prompt file is JSONL (prompts often contain newlines): one JSON object per line, with
``"prompt"`` — or ``"context"`` and ``"question"``, which ``--question-after-compression`` feeds
apart (the context is compressed, the question follows) and which are otherwise joined — and an
optional ``"uid"``. Blank lines are skipped. `evolalloc tasks dump` writes such files.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from evolalloc.cli import main
from evolalloc.cli.options import model_option, seed_option
from evolalloc.core.errors import UserError


def read_prompt_file(path: Path, question_after_compression: bool) -> list[tuple[str, object]]:
    """``[(uid, prompt)]``; a prompt is a string, or a (context, question) pair. Bad lines are ``UserError``s."""
    source = str(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UserError("no such file", source=source) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read: {err}", source=source) from None
    prompts = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"not a JSON object ({err.msg}); each line is "
                            f"one JSON object, e.g. {{\"prompt\": \"...\"}}",
                            source=source, field=where) from None
        if not isinstance(row, dict):
            raise UserError(f"expected a JSON object, got {type(row).__name__}", source=source, field=where)
        has_pair = isinstance(row.get("context"), str) and isinstance(row.get("question"), str)
        if question_after_compression:
            if not has_pair or not row["question"].strip():
                raise UserError("--question-after-compression needs string "
                                "fields \"context\" and a non-empty \"question\"",
                                source=source, field=where)
            prompt = (row["context"], row["question"])
        elif isinstance(row.get("prompt"), str):
            prompt = row["prompt"]
        elif has_pair:
            prompt = row["context"] + row["question"]
        else:
            raise UserError("needs a string field \"prompt\" (or \"context\" and \"question\")", source=source,
                            field=where)
        if not (prompt if isinstance(prompt, str) else prompt[0]).strip():
            raise UserError("empty prompt", source=source, field=where)
        prompts.append((str(row.get("uid", number)), prompt))
    if not prompts:
        raise UserError("no prompts in the file", source=source)
    return prompts


@main.command()
@click.option("--allocation", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Allocation JSON (a budget profile).")
@click.option("--prompt-file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="JSONL, one {\"prompt\": ...} per line.")
@model_option(help="Model spec: bundled:<name>, a local HF model folder or a .gguf file. Default: the model the "
                   "allocation was made for (its file's `model`).", default=None)
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--question-after-compression", is_flag=True,
              help="Compress each line's context, then feed its question.")
@click.option("--sample/--greedy", "do_sample", default=False, show_default=True,
              help="Sample instead of greedy decoding.")
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--top-p", type=float, default=1.0, show_default=True)
@click.option("--top-k", type=int, default=0, show_default=True)
@seed_option(help="Prompt i samples with seed + i.")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--decode-interval", type=int, default=None,
              help="Hold the budgets while decoding: every N generated tokens each (layer, KV head) is cut back to "
                   "its budget. Default: the allocation file's own decode setting (none: prompt-only).")
@click.option("--prompt-only", is_flag=True, help="Evict the prompt only, even if the allocation holds its budgets "
                                                   "while decoding.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSONL answers (default: stdout).")
def generate(allocation, prompt_file, model, max_new_tokens, question_after_compression, do_sample, temperature, top_p,
             top_k,
             seed, batch_size, decode_interval, prompt_only, output):
    """Answer each prompt of PROMPT_FILE with the KV cache evicted to ALLOCATION's budgets.

    Prints one JSON line per prompt (uid, text, KV bytes kept vs full, what was clipped) and a
    summary of the memory kept.
    """
    from evolalloc.core.allocation_file import load_allocation

    prompts = read_prompt_file(prompt_file, question_after_compression)
    made_for = load_allocation(allocation)
    decode = _decode_option(made_for, decode_interval, prompt_only)  # before the model loads
    model = model or made_for.model  # a Gemma profile answers on Gemma without --model
    import torch

    from evolalloc.core.fileio import write_atomic
    from evolalloc.runtime.generation import generate as run
    from evolalloc.runtime.model import load_model

    torch.set_num_threads(int(__import__("os").environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
    loaded = load_model(model)
    profile = load_allocation(allocation, expect_geometry=loaded.geometry)
    if prompt_only:
        profile = dataclasses.replace(profile, decode=None)
    result = run(loaded.model, loaded.tokenizer, [p for _, p in prompts], profile, max_new_tokens=max_new_tokens,
                 question_after_compression=question_after_compression, do_sample=do_sample, temperature=temperature,
                 top_p=top_p, top_k=top_k, seed=seed, batch_size=batch_size, decode=decode)
    lines = [json.dumps({"uid": uid, "text": text, "stopped_by": stop, "prompt_tokens": n, "kv_bytes_kept": m.actual,
                         "kv_bytes_full": m.full, "note": note})
             for (uid, _), text, stop, n, m, note in zip(prompts, result.texts, result.stopped_by,
                                                         result.prompt_lengths,
                                                         result.kv_bytes, result.notes)]
    if output is None:
        for line in lines:
            click.echo(line)
    else:
        write_atomic(output, "\n".join(lines) + "\n")
        click.echo(f"wrote {output}")
    kept, full = result.kv_bytes_kept, result.kv_bytes_full
    held = (f", held while decoding (every {result.decode.interval} tokens)" if result.decode is not None
            else ", prompt only")
    click.echo(f"{len(lines)} prompts; KV cache kept {kept / 2**20:.2f} MiB of {full / 2**20:.2f} MiB "
               f"({100 * kept / full:.1f}%) with {allocation}{held}", err=True)


def _decode_option(allocation, interval: int | None, prompt_only: bool):
    """The decode setting the options ask for (``None``: the file's own), checked before any model loads:
    an interval below 1, both options, or a scorer that cannot rank generated tokens is a ``UserError``."""
    from evolalloc.core.decode_eviction import DecodeEviction

    if prompt_only and interval is not None:
        raise UserError("--decode-interval and --prompt-only contradict each other; give one",
                        field="--decode-interval")
    if interval is None:
        return None
    try:
        setting = DecodeEviction(interval)
    except ValueError as err:
        raise UserError(str(err), field="--decode-interval") from None
    from evolalloc.runtime.scorers import SCORERS

    try:
        scorer = SCORERS.get(allocation.scorer)
    except ValueError as err:  # an unknown scorer name in the file
        raise UserError(str(err), field="scorer") from None
    if not scorer.ranks_generated:
        raise UserError(f"scorer {allocation.scorer!r} cannot rank generated tokens ({scorer.why_not_generated}); "
                        "this allocation cannot hold its budgets while decoding", field="--decode-interval")
    return setting
