"""Passkey: the classic prompt, its exact ending, length, determinism and splits."""

import re

import pytest

import fitness

ENDING = "What is the pass key? The pass key is"


def test_the_raw_prompt_ends_with_the_question_and_the_question_is_that_ending(generate):
    for inst in generate("passkey"):
        assert inst.prompt.endswith("\n" + ENDING)
        assert inst.question == ENDING
        assert inst.prompt == inst.context + inst.question


def test_the_passkey_is_five_digits_and_its_needle_occurs_exactly_once(generate):
    for inst in generate("passkey", n=5):
        [key] = inst.references
        assert re.fullmatch(r"\d{5}", key)
        needle = f"The pass key is {key}. Remember it. {key} is the pass key."
        assert inst.prompt.count(needle) == 1
        assert inst.prompt.count(key) == 2  # both inside the needle: the answer is recoverable
        assert "The grass is green. The sky is blue." in inst.context


def test_decoding_settings_suit_a_short_numeric_answer(generate):
    inst = generate("passkey")[0]
    assert inst.max_new_tokens <= 8 and inst.stop == ("\n",)


@pytest.mark.parametrize("length", [1024, 2048, 4096])
def test_the_prompt_is_within_two_percent_of_the_requested_length(generate, tokenizer, length):
    for inst in generate("passkey", context_tokens=length):
        tokens = len(tokenizer.encode(inst.prompt, add_special_tokens=False))
        assert abs(tokens - length) <= 0.02 * length
        assert inst.metadata["context_tokens"] == tokens


def test_context_and_question_tokenise_the_same_apart_as_together(generate, tokenizer):
    # The question may be fed after compression: splitting must not change the tokens.
    inst = generate("passkey")[0]
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    assert encode(inst.context) + encode(inst.question) == encode(inst.prompt)


def test_even_depths_spread_the_needle_from_start_to_end(generate):
    insts = generate("passkey", n=5)
    assert [i.metadata["depth"] for i in insts] == [0.0, 0.25, 0.5, 0.75, 1.0]
    positions = [i.prompt.find("The pass key is") / len(i.prompt) for i in insts]
    assert positions == sorted(positions) and positions[0] < 0.1 and positions[-1] > 0.9


def test_random_depths_depend_on_the_seed(generate):
    a = [i.metadata["depth"] for i in generate("passkey", n=4, seed=1, depth="random")]
    b = [i.metadata["depth"] for i in generate("passkey", n=4, seed=2, depth="random")]
    assert a != b and all(0.0 <= d <= 1.0 for d in a)


def test_the_same_seed_gives_the_same_instances_and_another_seed_others(tokenizer):
    task = fitness.get_task("passkey")
    first = task.instances("search", 3, 7, 1024, tokenizer)
    again = fitness.get_task("passkey").instances("search", 3, 7, 1024, tokenizer)
    other = task.instances("search", 3, 8, 1024, tokenizer)
    assert first == again
    assert [i.references for i in first] != [i.references for i in other]
    assert len({i.uid for i in first}) == 3


def test_scoring_finds_the_key_in_the_answer(generate):
    inst = generate("passkey")[0]
    task = fitness.get_task("passkey")
    [key] = inst.references
    assert task.score(inst, f" {key}. Remember it.") == (1.0, 1.0)
    assert task.score(inst, " 00000") == (0.0, 0.0)
    assert task.score(inst, "") == (0.0, 0.0)


def test_an_unknown_split_or_a_missing_tokenizer_is_an_error():
    task = fitness.get_task("passkey")
    with pytest.raises(fitness.FitnessError, match="search, heldout"):
        task.instances("train", 1, 0, 1024, object())
    with pytest.raises(fitness.FitnessError, match="tokenizer"):
        task.instances("search", 1, 0, 1024, None)


def test_a_length_too_small_for_the_template_is_an_error(tokenizer):
    with pytest.raises(fitness.FitnessError, match="context_tokens=20"):
        fitness.get_task("passkey").instances("search", 1, 0, 20, tokenizer)
