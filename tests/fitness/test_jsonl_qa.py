"""``jsonl_qa``: your own questions from a JSONL file — the prompt, the metric by name, splits drawn
by a hash of each record, and one clear error (file, line, field) for every kind of bad line."""

import json
import re
from pathlib import Path

import pytest

import fitness
from fitness import FitnessDataError, FitnessError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qa.jsonl"


def record(i, **overrides):
    base = {"id": f"q{i}", "context": f"The lighthouse keeper number {i} painted the door blue. " * 4,
            "question": f"What colour did keeper {i} paint the door?", "answers": ["blue"]}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.fixture
def qa_file(tmp_path):
    return write(tmp_path / "mine.jsonl", [record(i) for i in range(20)])


def test_the_prompt_is_the_context_then_the_question_then_the_answer_prefix(qa_file, tokenizer):
    task = fitness.get_task("jsonl_qa", path=qa_file)
    [inst] = task.instances("search", 1, 0, None, tokenizer)
    i = int(inst.metadata["id"][1:])
    assert inst.context == record(i)["context"].rstrip() + "\n\n"
    assert inst.question == f"Question: What colour did keeper {i} paint the door?\nAnswer:"
    assert inst.references == ("blue",) and inst.max_new_tokens == 32 and task.metric == "qa_f1"
    assert inst.metadata["line"] == i + 1 and inst.metadata["truncated"] is False


def test_the_answer_prefix_and_the_metric_are_the_users(qa_file, tokenizer):
    task = fitness.get_task("jsonl_qa", path=qa_file, metric="exact_match", answer_prefix="\nShort answer:")
    [inst] = task.instances("heldout", 1, 0, None, tokenizer)
    assert inst.question.endswith("?\nShort answer:") and task.metric == "exact_match"
    assert task.score(inst, " Blue.\nAnd then...")[0] == 1.0  # first line only, normalised
    assert task.score(inst, " a blue door")[0] == 0.0
    assert fitness.get_task("jsonl_qa", path=qa_file).score(inst, " a blue door")[0] == pytest.approx(2 / 3)


def test_an_unknown_metric_is_refused_with_the_closest_name(qa_file):
    with pytest.raises(FitnessError, match=r"unknown metric 'qa_f2' \(did you mean 'qa_f1'\?\)"):
        fitness.get_task("jsonl_qa", path=qa_file, metric="qa_f2")


def test_without_a_path_the_task_says_what_it_needs():
    with pytest.raises(FitnessError, match="needs path="):
        fitness.get_task("jsonl_qa")


def test_the_splits_are_disjoint_exact_and_do_not_depend_on_the_line_order(tmp_path, qa_file, tokenizer):
    task = fitness.get_task("jsonl_qa", path=qa_file, heldout_fraction=0.25)

    def ids(t, split, n):
        return {i.metadata["id"] for i in t.instances(split, n, 0, None, tokenizer)}

    search, heldout = ids(task, "search", 15), ids(task, "heldout", 5)
    assert len(search) == 15 and len(heldout) == 5 and not search & heldout
    reversed_file = write(tmp_path / "reversed.jsonl", [record(i) for i in reversed(range(20))])
    again = fitness.get_task("jsonl_qa", path=reversed_file, heldout_fraction=0.25)
    assert ids(again, "heldout", 5) == heldout
    with pytest.raises(FitnessError, match="asked for 6 heldout instances but its heldout split holds 5 of 20"):
        task.instances("heldout", 6, 0, None, tokenizer)


def test_a_long_prompt_is_cut_in_the_middle_of_its_context_and_keeps_the_question(tmp_path, tokenizer):
    long = record(0,
                  context="It began at dawn. " + "The sea was grey and the wind was cold. " * 200 + "It ended at dusk.")
    task = fitness.get_task("jsonl_qa", path=write(tmp_path / "long.jsonl", [long, record(1)]))
    [inst] = [i
              for i in task.instances("search", 1, 0, 300, tokenizer) + task.instances("heldout", 1, 0, 300, tokenizer)
              if i.metadata["id"] == "q0"]
    assert inst.metadata["truncated"] and inst.metadata["context_tokens"] <= 300
    assert inst.context.startswith("It began at dawn.") and inst.context.rstrip().endswith("It ended at dusk.")
    assert inst.question == "Question: What colour did keeper 0 paint the door?\nAnswer:"


@pytest.mark.parametrize(
    "bad, field, problem",
    [
        (record(9, context=...), "context", "missing"),
        (record(9, question=""), "question", "expected text, got a blank string"),
        (record(9, answers="blue"), "answers", "expected a non-empty list of strings"),
        (record(9, answers=[]), "answers", "expected a non-empty list of strings"),
        (record(9, answers=["blue", " "]), "answers", "expected non-blank strings, got a blank one"),
        (record(9, context=42), "context", "expected a string, got int"),
        (record(9, id=1.5), "id", "expected a string or an integer, got float"),
        (record(9, id="q2"), "id", "'q2' repeats line 3's"),
    ],
)
def test_a_bad_line_is_one_error_naming_the_file_the_line_and_the_field(tmp_path, bad, field, problem):
    path = write(tmp_path / "bad.jsonl", [record(i) for i in range(4)] + [bad])
    with pytest.raises(FitnessDataError) as err:
        fitness.get_task("jsonl_qa", path=path)
    assert str(err.value) == f"{path}:5: field '{field}': {problem}"


def test_a_line_that_is_not_json_names_its_line(tmp_path):
    path = write(tmp_path / "bad.jsonl", [record(0), "", '{"context": "x", '])
    with pytest.raises(FitnessDataError, match=r"bad.jsonl:3: not valid JSON"):
        fitness.get_task("jsonl_qa", path=path)


def test_records_without_ids_split_by_their_text_and_integer_ids_are_fine(tmp_path, tokenizer):
    rows = [record(i, id=...) for i in range(6)] + [record(i, id=100 + i) for i in range(6, 10)]
    task = fitness.get_task("jsonl_qa", path=write(tmp_path / "mixed.jsonl", rows))
    seen = task.instances("search", 5, 0, None, tokenizer) + task.instances("heldout", 5, 0, None, tokenizer)
    assert sorted(i.metadata["line"] for i in seen) == list(range(1, 11))


def test_the_shipped_example_answers_every_question_from_its_own_context(tokenizer):
    task = fitness.get_task("jsonl_qa", path=str(EXAMPLE))
    assert len(task.records) >= 5 and task.split_sizes == (5, 5)
    for _, row in task.records:
        assert any(answer in row["context"] for answer in row["answers"]), row["id"]
    first = json.loads(EXAMPLE.read_text(encoding="utf-8").splitlines()[0])
    assert set(first) == {"id", "context", "question", "answers"}


def test_the_five_line_example_in_the_docs_is_a_valid_file(tmp_path, tokenizer):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "your-data.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```json\n(.*?)```", doc, flags=re.S)
    path = tmp_path / "five.jsonl"
    path.write_text(block, encoding="utf-8")
    task = fitness.get_task("jsonl_qa", path=str(path))
    assert len(task.records) == 5 and sum(task.split_sizes) == 5
    [inst] = task.instances("search", 1, 0, None, tokenizer)
    assert inst.references and inst.question.startswith("Question: ")
