"""NIAH over the user's own text: the depth x length grid, keyword scoring, disjoint splits."""

import pytest

import fitness
from fitness.tasks.niah import DEFAULT_NEEDLE


def test_instances_cycle_through_the_depth_by_length_grid(generate, haystack_dir):
    insts = generate("niah", n=6, context_tokens=None, haystack_dir=haystack_dir, depths=(0.0, 0.5, 1.0),
                     lengths=(512, 1024))
    cells = [(i.metadata["target_tokens"], i.metadata["depth"]) for i in insts]
    assert cells == [(512, 0.0), (512, 0.5), (512, 1.0), (1024, 0.0), (1024, 0.5), (1024, 1.0)]
    for inst in insts:
        assert inst.context.count(DEFAULT_NEEDLE) == 1
        assert (
            abs(inst.metadata["context_tokens"] - inst.metadata["target_tokens"])
            <= 0.02 * inst.metadata["target_tokens"]
        )


def test_the_needle_moves_from_the_start_to_the_end_with_depth(generate, haystack_dir):
    insts = generate("niah", n=3, context_tokens=1024, haystack_dir=haystack_dir, depths=(0.0, 0.5, 1.0))
    where = [i.context.find(DEFAULT_NEEDLE) / len(i.context) for i in insts]
    assert where[0] < 0.1 < where[1] < 0.9 < where[2]


def test_the_question_asks_for_the_needle_and_keywords_score_the_answer(generate, haystack_dir):
    inst = generate("niah", n=1, haystack_dir=haystack_dir)[0]
    assert inst.question == "Question: What is the best thing to do in San Francisco? Answer:"
    task = fitness.get_task("niah", haystack_dir=haystack_dir)
    assert task.score(inst, "Eat a sandwich in Dolores Park on a sunny day.") == (1.0, 1.0)
    assert task.score(inst, "Eat a sandwich.")[1] == pytest.approx(1 / 3)


def test_a_custom_needle_needs_its_keywords(haystack_dir, tokenizer):
    with pytest.raises(fitness.FitnessError, match="keywords"):
        fitness.get_task("niah", haystack_dir=haystack_dir, needle="The code word is marmalade.")
    task = fitness.get_task(
        "niah", haystack_dir=haystack_dir, needle="The code word is marmalade.", question="What is the code word?",
                            keywords="marmalade"
    )
    [inst] = task.instances("search", 1, 0, 1024, tokenizer)
    assert inst.references == ("marmalade",) and inst.context.count("The code word is marmalade.") == 1


def test_search_and_heldout_start_the_haystack_at_different_sentences(generate, haystack_dir):
    search = generate("niah", split="search", n=5, haystack_dir=haystack_dir)
    heldout = generate("niah", split="heldout", n=5, haystack_dir=haystack_dir)
    assert not {i.prompt for i in search} & {i.prompt for i in heldout}
    assert {i.metadata["offset"] for i in search}.isdisjoint({i.metadata["offset"] for i in heldout})


def test_niah_without_a_haystack_directory_says_what_it_needs():
    with pytest.raises(fitness.FitnessError, match="haystack_dir"):
        fitness.get_task("niah")
