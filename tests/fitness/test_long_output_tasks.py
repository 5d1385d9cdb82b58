"""The long-output tasks on the bundled prose: ``continue_prose`` (a prompt to continue, judged against
the full cache) and ``repeat_passage`` (a named passage to repeat word for word). Each split reads
only its own passages of the books."""

import pytest

import fitness
from fitness import FitnessError
from fitness.tasks.prose import ProseHaystack, load_passages
from fitness.tasks.repeat_passage import block


@pytest.fixture(scope="module")
def split_of_passage():
    return {p.name: p.split for p in load_passages()}


@pytest.mark.parametrize("split", ["search", "heldout"])
def test_a_prose_prompt_reads_only_its_own_splits_passages(generate, split, split_of_passage):
    instances = generate("continue_prose", split=split, n=4, context_tokens=512)
    for inst in instances:
        assert {split_of_passage[name] for name in inst.metadata["passages"]} == {split}
        assert inst.context in " ".join(ProseHaystack(split).words)
    assert len({inst.metadata["offset"] for inst in instances}) == 4  # four different places in the books


def test_a_prose_prompt_has_the_asked_length_no_answers_and_is_judged_against_the_full_cache(generate, tokenizer):
    task = fitness.get_task("continue_prose")
    [inst] = generate("continue_prose", n=1, context_tokens=1024)
    assert 1024 * 0.98 <= inst.metadata["context_tokens"] <= 1024 and inst.question == "" and inst.references == ()
    assert inst.max_new_tokens == 128 and task.judged_against_full_cache
    assert task.default_fitness_mode == "fidelity-tokens"
    assert [i.context for i in task.instances("search", 1, 0, 1024, tokenizer)] == [inst.context]  # deterministic
    assert fitness.get_task("continue_prose", max_new_tokens=256).instances("search", 1, 0, 300,
                                                                             tokenizer)[0].max_new_tokens == 256


@pytest.mark.parametrize("context_tokens", [1024, 2048])
def test_a_repeat_prompt_holds_the_asked_passage_under_its_name_and_opens_the_answer(generate, tokenizer,
                                                                                    context_tokens):
    for inst in generate("repeat_passage", n=3, context_tokens=context_tokens):
        name, (answer,) = inst.metadata["asked"], inst.references
        cue = inst.question.split("\n")[-1]
        assert len(cue.split(" ")) == 8 and inst.question.startswith(f'Repeat passage "{name}" word for word.')
        assert block(name, f"{cue} {answer}") in inst.context  # the passage, under that name, once
        assert inst.context.count(f'Passage "{name}":') == 1
        assert inst.metadata["answer_tokens"] >= 128 and inst.max_new_tokens == 256 and inst.stop == ("\n",)
        assert context_tokens - 200 < inst.metadata["context_tokens"] <= context_tokens
        assert inst.metadata["passages"] >= 2


@pytest.mark.parametrize("split, other", [("search", "heldout"), ("heldout", "search")])
def test_a_repeat_prompt_reads_only_its_own_splits_passages(generate, split, other):
    own, theirs = " ".join(ProseHaystack(split).words), " ".join(ProseHaystack(other).words)
    for inst in generate("repeat_passage", split=split, n=3, context_tokens=1024):
        assert inst.references[0] in own and inst.references[0] not in theirs


@pytest.mark.parametrize("split", ["search", "heldout"])
def test_a_passage_drawn_at_the_last_start_reads_on_into_the_splits_tail(generate, tokenizer, split, monkeypatch):
    """Passages start before the last 200 sentences of a split and may read into them. Until 2026-11-30 they
    could not, and a start drawn near the end raised 'ran past the end' (held-out prompt 12 of seed 52)."""
    import random

    from fitness.tasks import repeat_passage

    task, prose = fitness.get_task("repeat_passage"), ProseHaystack(split)
    starts = prose.sentence_starts()
    last = len(starts) - repeat_passage._TAIL - 1  # the last start a prompt can draw

    class LastFirst(random.Random):
        """The task's own draws, but its first passage starts at the last start it may draw."""
        first = True

        def randrange(self, n, *more):
            if self.first and not more:
                self.first = False
                return n - 1
            return super().randrange(n, *more)

    seeded = repeat_passage.rng_for
    monkeypatch.setattr(repeat_passage, "rng_for", lambda *key: LastFirst(seeded(*key).random()))
    [inst] = task.instances(split, 1, 0, 1024, tokenizer)
    # that start's sentence and the first of the tail after it, in the prompt: the passage read on into the tail
    assert " ".join(prose.words[starts[last]:starts[last + 2]]) in inst.context
    monkeypatch.undo()
    drawn = generate("repeat_passage", split=split, n=13, seed=52, context_tokens=1024)
    assert len(drawn) == 13 and drawn[12].references[0] in " ".join(prose.words)


def test_the_passage_itself_scores_one_and_a_partial_answer_less(generate):
    task = fitness.get_task("repeat_passage")
    [inst] = generate("repeat_passage", n=1, context_tokens=1024)
    answer = inst.references[0]
    words = answer.split(" ")
    assert task.score(inst, " " + answer + "\n") == (1.0, 1.0)
    half = task.score(inst, " ".join(words[: len(words) // 2]))[0]
    assert 0.4 < half < 0.6
    assert task.reference_continuations(inst) == (" " + answer,)  # the likelihood mode's: the rest of the passage
    assert task.default_fitness_mode == "likelihood" and not task.judged_against_full_cache


def test_without_a_cue_the_answer_is_the_whole_passage(generate):
    [inst] = generate("repeat_passage", n=1, context_tokens=1024, cue_words=0)
    name = inst.metadata["asked"]
    assert inst.question.endswith(f'Passage "{name}":\n') and block(name, inst.references[0]) in inst.context


def test_its_parameters_are_checked(tokenizer):
    with pytest.raises(FitnessError, match="metric must be one of greedy_prefix, token_agreement"):
        fitness.get_task("repeat_passage", metric="rouge_l")
    with pytest.raises(FitnessError, match="passage_tokens must be an integer of at least 8"):
        fitness.get_task("repeat_passage", passage_tokens=2)
    with pytest.raises(FitnessError, match="fewer than two passages"):
        fitness.get_task("repeat_passage").instances("search", 1, 0, 200, tokenizer)
    with pytest.raises(FitnessError, match="metric must be one of greedy_prefix, token_agreement"):
        fitness.get_task("continue_prose", metric="exact_match")
