"""GSM8K from local JSONL: the 8-shot chain-of-thought prompt, answer extraction, accuracy."""

import json

import pytest

import fitness
from fitness import FitnessDataError


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def gsm8k(tmp_path):
    rows = [
        json.dumps({"question": f"Tom has {i} apples and buys 1,000 more. How many now?",
                    "answer": f"{i} + 1000 = <<{i}+1000={i + 1000}>>{i + 1000}\n#### {i + 1000:,}"})
        for i in range(30)
    ]
    return write(tmp_path / "test.jsonl", rows)


def test_the_prompt_is_eight_worked_examples_then_the_question(gsm8k):
    [inst] = fitness.get_task("gsm8k", data_file=gsm8k).instances("search", 1, 0, None, None)
    assert inst.context.count("Q: ") == 8 and inst.context.count("The answer is") == 8
    assert inst.context.startswith("Q: There are 15 trees in the grove.")
    assert inst.question.startswith("Q: Tom has") and inst.question.endswith("\nA:")
    assert "\n\n" in inst.stop


def test_the_reference_is_the_number_after_the_four_hashes_without_commas(gsm8k):
    task = fitness.get_task("gsm8k", data_file=gsm8k, num_shots=2)
    [inst] = task.instances("heldout", 1, 0, None, None)
    [answer] = inst.references
    assert "," not in answer and int(answer) >= 1000
    assert inst.context.count("Q: ") == 2
    assert task.score(inst, f"He buys more, so x + 1000. The answer is {int(answer):,}.") == (1.0, 1.0)
    assert task.score(inst, "The answer is 3.") == (0.0, 0.0)


def test_the_splits_are_disjoint(gsm8k):
    task = fitness.get_task("gsm8k", data_file=gsm8k)
    search = {i.question for i in task.instances("search", 8, 0, None, None)}
    heldout = {i.question for i in task.instances("heldout", 8, 0, None, None)}
    assert search and not search & heldout


def test_an_answer_without_a_final_number_names_file_line_and_field(tmp_path, gsm8k):
    lines = open(gsm8k).read().splitlines()
    lines[4] = json.dumps({"question": "q", "answer": "no final line"})
    path = write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(FitnessDataError, match=r"bad.jsonl:5: field 'answer': must end with"):
        fitness.get_task("gsm8k", data_file=path)


def test_a_missing_question_is_named(tmp_path):
    path = write(tmp_path / "bad.jsonl", [json.dumps({"answer": "#### 4"})])
    with pytest.raises(FitnessDataError, match=r"bad.jsonl:1: field 'question': missing"):
        fitness.get_task("gsm8k", data_file=path)


def test_duplicate_records_never_land_in_both_splits():
    from fitness.splits import partition

    identities = ["same"] * 5 + [f"other {i}" for i in range(5)]
    for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
        search, heldout = partition(identities, fraction)
        assert sorted(search + heldout) == list(range(10))
        assert not {identities[i] for i in search} & {identities[i] for i in heldout}
