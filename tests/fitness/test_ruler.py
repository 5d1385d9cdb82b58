"""The RULER-style generators: every needle once, the answer in the prompt, lengths within 2%,
determinism, disjoint splits, both prompt styles and both haystacks."""

import pytest

import fitness

RULER = ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking", "cwe", "fwe"]
NEEDLE_TASKS = ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking"]


@pytest.mark.parametrize("name", RULER)
@pytest.mark.parametrize("length", [1024, 2048, 4096])
def test_the_prompt_is_within_two_percent_of_the_requested_length(generate, tokenizer, name, length):
    for inst in generate(name, n=2, context_tokens=length):
        tokens = len(tokenizer.encode(inst.prompt, add_special_tokens=False))
        assert abs(tokens - length) <= 0.02 * length, (name, tokens)


@pytest.mark.parametrize("name", NEEDLE_TASKS)
def test_every_needle_occurs_exactly_once(generate, name):
    for inst in generate(name, n=3):
        needles = inst.metadata.get("needles") or [s for _, s in inst.metadata["placed"]]
        assert needles
        for needle in needles:
            assert inst.context.count(needle) == 1, needle


@pytest.mark.parametrize("name", RULER)
def test_the_answer_is_recoverable_from_the_prompt(generate, name):
    for inst in generate(name, n=3):
        assert inst.references
        for ref in inst.references:
            assert ref in inst.context, ref


def test_niah_values_occur_only_in_their_needles(generate):
    for needle_type in ("number", "word", "uuid"):
        for inst in generate("niah_multikey", n=2, needle_type=needle_type):
            for ref in inst.references:
                assert inst.prompt.count(ref) == 1


def test_multikey_has_distractors_and_multiquery_asks_for_every_key(generate):
    multikey = generate("niah_multikey")[0]
    assert len(multikey.metadata["needles"]) == 4 and len(multikey.references) == 1
    multiquery = generate("niah_multiquery")[0]
    assert len(multiquery.references) == 4
    assert all(key in multiquery.question for key in multiquery.metadata["keys"])
    multivalue = generate("niah_multivalue")[0]
    assert len(multivalue.references) == 4 and len(multivalue.metadata["keys"]) == 1


def test_variable_tracking_names_every_variable_of_the_queried_chain(generate):
    inst = generate("variable_tracking", num_chains=2, num_hops=3)[0]
    value = inst.metadata["value"]
    assert len(inst.references) == 4
    assert f"VAR {inst.references[0]} = {value}." in inst.context
    for a, b in zip(inst.references, inst.references[1:]):
        assert inst.context.index(f"VAR {a} =") < inst.context.index(f"VAR {b} = VAR {a}.")


def test_cwe_common_words_are_the_most_frequent_entries(generate):
    inst = generate("cwe")[0]
    listing = inst.context.split("\n")[1].split()
    words = [w for w in listing if not w.endswith(".")]
    counts = {w: words.count(w) for w in set(words)}
    common = sorted(counts, key=counts.get, reverse=True)[:10]
    assert set(common) == set(inst.references)
    assert min(counts[w] for w in inst.references) > max(c for w, c in counts.items() if w not in inst.references)


def test_fwe_answers_are_the_three_most_frequent_words_in_order(generate):
    inst = generate("fwe")[0]
    words = inst.context.split("\n")[1].split()
    counts = sorted(((words.count(w), w) for w in set(words)), reverse=True)
    assert tuple(w for _, w in counts[:3]) == inst.references
    assert counts[2][0] > counts[3][0]


@pytest.mark.parametrize("name", RULER + ["passkey"])
def test_search_and_heldout_never_share_an_instance(generate, name):
    search = generate(name, split="search", n=8, seed=3)
    heldout = generate(name, split="heldout", n=8, seed=3)
    assert not {i.prompt for i in search} & {i.prompt for i in heldout}
    assert not {i.references for i in search} & {i.references for i in heldout}
    assert all(i.split == "search" for i in search) and all(i.split == "heldout" for i in heldout)


@pytest.mark.parametrize("name", RULER)
def test_the_same_seed_gives_the_same_instances(generate, tokenizer, name):
    fresh = fitness.get_task(name).instances("search", 2, 0, 1024, tokenizer)
    assert tuple(fresh) == generate(name, n=2)


@pytest.mark.parametrize("name", ["niah_single", "variable_tracking", "cwe"])
def test_the_chat_style_wraps_the_prompt_in_the_template_and_keeps_the_question_last(generate, name):
    inst = generate(name, prompt_style="chat")[0]
    assert inst.context.startswith("<|im_start|>")
    assert "<|im_start|>assistant\n" in inst.question
    assert inst.question.startswith("What") or inst.question.startswith("Question")
    for ref in inst.references:
        assert ref in inst.context


def test_a_directory_haystack_holds_the_files_text_and_the_needle_once(generate, haystack_dir):
    for inst in generate("niah_single", n=3, haystack_dir=haystack_dir, needle_type="word"):
        assert "Startups rarely fail" in inst.context or "Writing is a way of thinking" in inst.context
        assert "never read" not in inst.context  # only .txt files
        [needle] = inst.metadata["needles"]
        assert inst.context.count(needle) == 1
        assert inst.prompt.count(inst.references[0]) == 1


def test_needles_are_inserted_between_sentences_of_a_directory_haystack(generate, haystack_dir):
    for inst in generate("niah_single", n=5, haystack_dir=haystack_dir):
        [needle] = inst.metadata["needles"]
        before = inst.context.split(needle)[0].rstrip()
        assert before.endswith((".", "\n")), before[-40:]


def test_a_missing_haystack_directory_is_a_data_error(tmp_path):
    with pytest.raises(fitness.FitnessDataError, match="haystack_dir"):
        fitness.get_task("niah_single", haystack_dir=str(tmp_path / "absent"))
    with pytest.raises(fitness.FitnessDataError, match="no .txt files"):
        fitness.get_task("niah_single", haystack_dir=str(tmp_path))
