"""What each task offers the three fitness modes: a graded score next to the binary one, the
reference continuation the likelihood mode scores, and a default mode."""

from __future__ import annotations

import json

import pytest

import fitness
from fitness.metrics.matching import key_chars
from fitness.registry import task_class
from fitness.task import FITNESS_MODES, check_fitness_mode

# Every built-in task with the parameters it needs (files are made by the fixtures below).
GENERATED = ["passkey", "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking",
             "cwe", "fwe"]


@pytest.mark.parametrize("prediction, expected", [
    (" 12345.", 1.0),  # verbatim, punctuation around it does not matter
    ("The key is 12345 indeed", 1.0),
    (" 12045", 0.8),  # one wrong digit
    (" 1234", 0.8),  # one missing digit
    (" 123456", 1.0),  # holds the key: right for string_match_all, so right here too
    (" 1203456", 5 / 7),  # the key cut by other digits: the longer length counts
    (" 12354", 0.8),  # two digits swapped: one of them is out of order
    (" 99999", 0.0),
    ("", 0.0),
    ("no digits here 12 and 1234", 0.8),  # the best word counts
])
def test_key_chars_counts_the_characters_of_the_key_right_in_order(prediction, expected):
    assert key_chars(prediction, ("12345",)) == pytest.approx(expected)


def test_key_chars_averages_over_keys_that_are_all_needed():
    assert key_chars(" 1111, 2222", ("1111", "2222")) == pytest.approx(1.0)
    assert key_chars(" 1111, 2292", ("1111", "2222")) == pytest.approx((1 + 0.75) / 2)
    assert key_chars(" Apple", ("apple",)) == 1.0  # case does not matter, as in string_match_all


def test_the_passkey_graded_score_credits_the_digits_the_binary_one_does_not(generate):
    task = fitness.get_task("passkey")
    inst = generate("passkey", n=1)[0]
    key = inst.references[0]
    wrong_last = key[:-1] + str((int(key[-1]) + 1) % 10)
    assert task.score(inst, f" {wrong_last}.")[1] == 0.0
    assert task.graded_score(inst, f" {wrong_last}.") == pytest.approx(0.8)
    assert task.graded_score(inst, f" {key}.") == 1.0


def test_a_task_whose_metric_is_already_graded_uses_it_as_its_graded_score(generate):
    task = fitness.get_task("cwe")
    inst = generate("cwe", n=1, context_tokens=600)[0]
    half = " ".join(inst.references[: len(inst.references) // 2])
    assert task.graded_metric is None
    assert task.graded_score(inst, half) == task.score(inst, half)[1] == pytest.approx(0.5)


def test_every_built_in_task_defaults_to_a_valid_mode():
    assert all(task_class(name).default_fitness_mode in FITNESS_MODES for name in fitness.list_tasks())
    modes = {name: task_class(name).default_fitness_mode for name in fitness.list_tasks()}
    assert modes["passkey"] == modes["niah_single"] == modes["niah_multikey"] == "likelihood"
    assert modes["niah_multivalue"] == modes["niah_multiquery"] == "graded"
    assert modes["gsm8k"] == modes["longbench"] == modes["variable_tracking"] == "generate"
    assert modes["jsonl_prompts"] == modes["continue_prose"] == "fidelity-tokens"
    assert modes["repeat_passage"] == "likelihood"


def test_every_task_judged_against_the_full_cache_scores_token_sequences():
    from fitness.metrics.agreement import AGREEMENT_METRICS

    judged = [name for name in fitness.list_tasks() if task_class(name).judged_against_full_cache]
    assert set(judged) == {"jsonl_prompts", "continue_prose"}
    assert all(task_class(name).metric in AGREEMENT_METRICS for name in judged)


def test_an_unknown_mode_names_the_valid_ones():
    with pytest.raises(ValueError,
                       match="unknown fitness mode 'likelyhood'; valid modes: generate, graded, likelihood"):
        check_fitness_mode("likelyhood")


def test_the_passkey_continuation_is_a_space_token_then_one_token_per_digit(generate, tokenizer):
    task = fitness.get_task("passkey")
    inst = generate("passkey", n=1)[0]
    (continuation,) = task.reference_continuations(inst)
    assert inst.prompt.endswith("The pass key is") and continuation == " " + inst.references[0]
    ids = tokenizer.encode(continuation, add_special_tokens=False)
    assert [tokenizer.decode([i]) for i in ids] == [" ", *inst.references[0]]
    # Tokenized alone, the continuation is what the model sees after the prompt.
    prompt_ids = tokenizer.encode(inst.prompt, add_special_tokens=False)
    assert tokenizer.encode(inst.prompt + continuation, add_special_tokens=False) == prompt_ids + ids


@pytest.mark.parametrize("name", GENERATED)
def test_every_generated_task_continues_its_prompt_with_its_references(name, generate, tokenizer):
    task = fitness.get_task(name)
    for inst in generate(name, n=2, context_tokens=600):
        continuations = task.reference_continuations(inst)
        assert continuations and all(c.startswith(" ") and not c.startswith("  ") for c in continuations)
        # All references are needed at once: one continuation naming every one of them.
        assert len(continuations) == 1
        assert all(ref in continuations[0] for ref in inst.references)
        assert task.score(inst, continuations[0])[1] == 1.0 == task.graded_score(inst, continuations[0])


def test_niah_continues_with_its_needle(generate, haystack_dir):
    task = fitness.get_task("niah", haystack_dir=haystack_dir)
    inst = generate("niah", n=1, context_tokens=300, haystack_dir=haystack_dir)[0]
    (continuation,) = task.reference_continuations(inst)
    assert continuation == " " + task.needle and task.score(inst, continuation)[1] == 1.0


def test_longbench_answers_are_alternative_continuations(tmp_path, tokenizer):
    rows = [{"input": f"Who wrote letter {i}?", "context": f"Letter {i} was written by Ada. " * 3,
             "answers": ["Ada Lovelace", "Lovelace"], "dataset": "narrativeqa", "_id": f"id-{i}"} for i in range(6)]
    path = tmp_path / "narrativeqa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    task = fitness.get_task("longbench", data_file=str(path))
    inst = task.instances("search", 1, 0, None, tokenizer)[0]
    lead = "" if inst.prompt[-1].isspace() else " "
    assert task.reference_continuations(inst) == (lead + "Ada Lovelace", lead + "Lovelace")


def test_gsm8k_has_no_continuation_to_score(tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"}) + "\n"
                            for i in range(10)))
    task = fitness.get_task("gsm8k", data_file=str(path))
    inst = task.instances("search", 1, 0, None, None)[0]
    with pytest.raises(fitness.FitnessError, match="chain of thought"):
        task.reference_continuations(inst)
