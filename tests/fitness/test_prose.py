"""The bundled prose haystack: real book text, split-disjoint passages, needle values that occur
nowhere in the corpus, and the needle tasks (RULER, variable tracking, Kamradt NIAH) over it."""

import pytest

import fitness
from fitness.errors import FitnessError
from fitness.tasks.prose import ProseHaystack, load_passages

SHINGLE = 12  # words: long enough that a shingle names one place in the books


def shingles(words):
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


@pytest.fixture(scope="module")
def only_heldout():
    """Shingles of held-out passages that no search passage has (a shared stock phrase would not
    be a leak)."""
    search, heldout = ProseHaystack("search").words, ProseHaystack("heldout").words
    return shingles(heldout) - shingles(search)


def haystack_words(inst):
    """The instance's context with its needles and the task's header taken out, as words."""
    text = inst.context
    needles = inst.metadata.get("needles") or [s for _, s in inst.metadata.get("placed",
                                                                               ())] or [inst.metadata.get("needle", "")]
    for needle in needles:
        text = text.replace(needle, " ")
    return text.split("\n", 1)[1].split() if "\n" in text else text.split()


def test_every_passage_is_in_exactly_one_split_and_both_splits_hold_several_books():
    passages = load_passages()
    names = [p.name for p in passages]
    assert len(names) == len(set(names)) > 100
    for split in ("search", "heldout"):
        books = {p.name.split("/")[0] for p in passages if p.split == split}
        assert len(books) >= 4, (split, books)
    search, heldout = ProseHaystack("search"), ProseHaystack("heldout")
    assert {n for _, n in search.bounds}.isdisjoint(n for _, n in heldout.bounds)
    assert len(search.words) + len(heldout.words) == sum(len(p.words) for p in passages)


def test_the_haystack_is_running_prose_without_source_markup():
    text = " ".join(ProseHaystack().words)
    assert "_" not in text and "[" not in text
    assert "Father Brown" in text and "Alice" in text


@pytest.mark.parametrize("name, params", [
    ("niah_single", {"needle_type": "number"}),
    ("niah_single", {"needle_type": "word"}),
    ("variable_tracking", {}),
])
def test_search_and_heldout_haystacks_share_no_passage(generate, only_heldout, name, params):
    search_stream = shingles(ProseHaystack("search").words)
    for inst in generate(name, split="search", n=4, haystack="prose", **params):
        own = shingles(haystack_words(inst))
        assert not own & only_heldout, inst.uid
        # and it really is book text: nearly every shingle (all but those across a needle) is one
        assert len(own & search_stream) > 0.9 * len(own), inst.uid
    heldout_stream = shingles(ProseHaystack("heldout").words)
    for inst in generate(name, split="heldout", n=4, haystack="prose", **params):
        own = shingles(haystack_words(inst))
        assert len(own & heldout_stream) > 0.9 * len(own), inst.uid


def test_kamradt_niah_over_prose_keeps_the_splits_apart(generate, only_heldout):
    for split in ("search", "heldout"):
        for inst in generate("niah", split=split, n=3, haystack="prose"):
            assert inst.context.count("Dolores Park") == 1
            if split == "search":
                assert not shingles(inst.context.replace("\n", " ").split()) & only_heldout


def test_word_values_occur_nowhere_in_the_books_and_once_in_the_prompt(generate):
    haystack = ProseHaystack()
    for split in ("search", "heldout"):
        for inst in generate("niah_single", split=split, n=4, haystack="prose", needle_type="word"):
            (value,) = inst.references
            assert value.isalpha() and not haystack.contains(value)
            assert inst.prompt.count(value) == 1


def test_variable_tracking_over_prose_places_every_hop_in_order(generate):
    inst = generate("variable_tracking", haystack="prose")[0]
    refs = inst.references
    assert f"VAR {refs[0]} = {inst.metadata['value']}." in inst.context
    for a, b in zip(refs, refs[1:]):
        assert inst.context.index(f"VAR {a} =") < inst.context.index(f"VAR {b} = VAR {a}.")


def test_prose_instances_differ_by_seed_and_repeat_for_the_same_seed(generate, tokenizer):
    a = generate("niah_single", seed=0, haystack="prose")
    again = fitness.get_task("niah_single", haystack="prose").instances("search", 3, 0, 1024, tokenizer)
    assert [i.prompt for i in a] == [i.prompt for i in again]
    b = generate("niah_single", seed=1, haystack="prose")
    assert {i.prompt for i in a}.isdisjoint(i.prompt for i in b)


def test_an_unknown_haystack_or_two_haystacks_at_once_is_refused(haystack_dir):
    with pytest.raises(FitnessError, match="unknown haystack 'essays'; valid: noise, prose"):
        fitness.get_task("niah_single", haystack="essays")
    with pytest.raises(FitnessError, match="either haystack_dir or haystack: prose"):
        fitness.get_task("variable_tracking", haystack="prose", haystack_dir=haystack_dir)
    with pytest.raises(FitnessError, match="needs haystack_dir .* or haystack: prose"):
        fitness.get_task("niah")
