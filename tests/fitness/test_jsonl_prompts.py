"""``jsonl_prompts``: a file of prompts with no answers is a task — each prompt used as written, judged
against the full cache's own continuation, splits by a hash of the id, and one clear error (file,
line, field) for every kind of bad line."""

import json

import pytest

import fitness
from fitness import FitnessDataError, FitnessError
from fitness.task import FITNESS_MODES


def record(i, **overrides):
    base = {"id": f"p{i}", "prompt": f"Prompt number {i}: once upon a time, in a lighthouse by the sea,"}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.fixture
def prompts_file(tmp_path):
    return write(tmp_path / "mine.jsonl", [record(i) for i in range(20)])


def ids(task, split, n, tokenizer, seed=0):
    return {i.metadata["id"] for i in task.instances(split, n, seed, None, tokenizer)}


def test_a_prompt_is_used_as_written_with_no_answers_and_the_fidelity_mode_by_default(prompts_file, tokenizer):
    task = fitness.get_task("jsonl_prompts", path=prompts_file)
    [inst] = task.instances("search", 1, 0, None, tokenizer)
    i = int(inst.metadata["id"][1:])
    assert inst.context == record(i)["prompt"] and inst.question == "" and inst.references == ()
    assert inst.max_new_tokens == 64 and inst.metadata["line"] == i + 1 and inst.metadata["truncated"] is False
    assert task.metric == "greedy_prefix" and task.graded_metric == "token_agreement"
    assert task.judged_against_full_cache and task.default_fitness_mode == "fidelity-tokens" in FITNESS_MODES


def test_it_is_scored_against_the_full_caches_tokens_and_nothing_else(prompts_file, tokenizer):
    task = fitness.get_task("jsonl_prompts", path=prompts_file, metric="token_agreement", max_new_tokens=8)
    [inst] = task.instances("heldout", 1, 0, None, tokenizer)
    assert inst.max_new_tokens == 8
    assert task.score_against(inst, [4, 5, 6, 7], [4, 5, 6, 7]) == (1.0, 1.0)
    assert task.score_against(inst, [4, 5, 9, 7], [4, 5, 6, 7]) == (0.75, 0.75)
    assert task.score_against(inst, [4, 5, 9, 7], [4, 5, 6, 7], graded=True)[1] == 0.75  # token_agreement too
    with pytest.raises(FitnessError, match="no answers of its own"):
        task.score(inst, "some text")
    with pytest.raises(FitnessError, match="use fitness.mode fidelity-tokens"):
        task.reference_continuations(inst)


def test_the_split_follows_the_id_alone_whatever_the_line_order_or_the_prompt_text(tmp_path, prompts_file, tokenizer):
    task = fitness.get_task("jsonl_prompts", path=prompts_file, heldout_fraction=0.25)
    search, heldout = ids(task, "search", 15, tokenizer), ids(task, "heldout", 5, tokenizer)
    assert len(search) == 15 and len(heldout) == 5 and not search & heldout
    # The same ids, in reverse order and with other prompts: the same held-out records.
    other = write(tmp_path / "other.jsonl", [record(i, prompt=f"Another text, {i}.") for i in reversed(range(20))])
    again = fitness.get_task("jsonl_prompts", path=other, heldout_fraction=0.25)
    assert ids(again, "heldout", 5, tokenizer) == heldout
    assert ids(again, "heldout", 5, tokenizer, seed=3) == heldout  # the seed picks the order, not the split
    with pytest.raises(FitnessError, match="asked for 6 heldout instances but its heldout split holds 5 of 20"):
        task.instances("heldout", 6, 0, None, tokenizer)


def test_a_long_prompt_is_cut_in_the_middle_to_context_tokens(tmp_path, tokenizer):
    long = record(0, prompt="It began at dawn. " + "The sea was grey and the wind was cold. " * 200 + "It ended at")
    task = fitness.get_task("jsonl_prompts", path=write(tmp_path / "long.jsonl", [long, record(1)]))
    [inst] = [i for split in ("search", "heldout") for i in task.instances(split, 1, 0, 300, tokenizer)
              if i.metadata["id"] == "p0"]
    assert inst.metadata["truncated"] and inst.metadata["context_tokens"] <= 300
    assert inst.context.startswith("It began at dawn.") and inst.context.endswith("It ended at")


@pytest.mark.parametrize(
    "bad, field, problem",
    [
        (record(9, prompt=...), "prompt", "missing"),
        (record(9, prompt=""), "prompt", "expected text, got a blank string"),
        (record(9, prompt="  \n"), "prompt", "expected text, got a blank string"),
        (record(9, prompt=["a list"]), "prompt", "expected a string, got list"),
        (record(9, id=1.5), "id", "expected a string or an integer, got float"),
        (record(9, id="p2"), "id", "'p2' repeats line 3's"),
    ],
)
def test_a_bad_line_is_one_error_naming_the_file_the_line_and_the_field(tmp_path, bad, field, problem):
    path = write(tmp_path / "bad.jsonl", [record(i) for i in range(4)] + [bad])
    with pytest.raises(FitnessDataError) as err:
        fitness.get_task("jsonl_prompts", path=path)
    assert str(err.value) == f"{path}:5: field '{field}': {problem}"


def test_a_line_that_is_not_json_names_its_line(tmp_path):
    path = write(tmp_path / "bad.jsonl", [record(0), "", '{"prompt": "x", '])
    with pytest.raises(FitnessDataError, match=r"bad.jsonl:3: not valid JSON"):
        fitness.get_task("jsonl_prompts", path=path)


@pytest.fixture
def cli(monkeypatch, tokenizer, capsys):
    """``evolalloc ARGS`` in process, with the test tokenizer: ``(exit status, stdout, stderr)``."""
    import sys

    import evolalloc.runtime.model
    from evolalloc.cli import run

    monkeypatch.setattr(evolalloc.runtime.model, "load_tokenizer", lambda spec="": tokenizer)

    def invoke(*args):
        monkeypatch.setattr(sys, "argv", ["evolalloc", *args])
        try:
            run()
            code = 0
        except SystemExit as exit:
            code = exit.code
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def test_a_bad_line_stops_the_command_line_with_one_line_and_status_2(tmp_path, cli):
    path = write(tmp_path / "bad.jsonl", [record(0), record(1, prompt="")])
    code, _, err = cli("tasks", "show", "jsonl_prompts", "-p", f"path={path}")
    assert code == 2
    assert err.strip().splitlines() == [f"error: {path}:2: field 'prompt': expected text, got a blank string"]


def test_show_says_the_reference_is_the_full_caches_continuation(prompts_file, cli):
    code, out, _ = cli("tasks", "show", "jsonl_prompts", "-p", f"path={prompts_file}", "-p", "max_new_tokens=32")
    assert code == 0 and "default fitness mode: fidelity-tokens" in out
    assert "(none: judged against the full cache's own greedy continuation, 32 tokens)" in out


def test_its_parameters_are_checked(prompts_file):
    with pytest.raises(FitnessError, match="needs path="):
        fitness.get_task("jsonl_prompts")
    with pytest.raises(FitnessError, match="metric must be one of greedy_prefix, token_agreement, got 'qa_f1'"):
        fitness.get_task("jsonl_prompts", path=prompts_file, metric="qa_f1")
    with pytest.raises(FitnessError, match="max_new_tokens must be a positive integer"):
        fitness.get_task("jsonl_prompts", path=prompts_file, max_new_tokens=0)


def test_the_example_in_the_docs_and_the_shipped_file_are_valid_prompt_files(tmp_path, tokenizer):
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "your-data.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```jsonl\n(.*?)```", doc, flags=re.S)
    path = tmp_path / "four.jsonl"
    path.write_text(block, encoding="utf-8")
    task = fitness.get_task("jsonl_prompts", path=str(path))
    assert len(task.records) == 4 and sum(task.split_sizes) == 4
    shipped = fitness.get_task("jsonl_prompts", path=str(root / "examples" / "prompts.jsonl"))
    assert len(shipped.records) == 10 and shipped.split_sizes == (5, 5)
    assert all(inst.metadata["context_tokens"] > 200 for split in ("search", "heldout")
               for inst in shipped.instances(split, 5, 0, None, tokenizer))
