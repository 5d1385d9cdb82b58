"""LongBench from local JSONL: official prompts and settings, middle truncation, scoring, and one
clear error (file, line, field) for every kind of bad file."""

import json

import pytest

import fitness
from fitness import FitnessDataError
from fitness.tasks.longbench_config import SUBSETS


def record(i, **overrides):
    base = {
        "input": f"Who wrote letter {i}?",
        "context": f"Letter {i} was written by Ada Lovelace in the winter. " * 5,
        "answers": ["Ada Lovelace"],
        "length": 60,
        "dataset": "narrativeqa",
        "language": "en",
        "all_classes": None,
        "_id": f"id-{i}",
    }
    base.update(overrides)
    return base


def write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.fixture
def narrativeqa(tmp_path):
    return write(tmp_path / "narrativeqa.jsonl", [record(i) for i in range(40)])


def test_the_16_english_subsets_have_longbench_lengths_and_metrics():
    assert len(SUBSETS) == 16
    assert SUBSETS["narrativeqa"].max_new_tokens == 128 and SUBSETS["narrativeqa"].metric == "qa_f1"
    assert SUBSETS["gov_report"].max_new_tokens == 512 and SUBSETS["gov_report"].metric == "rouge_l"
    assert SUBSETS["samsum"].max_new_tokens == 128 and SUBSETS["trec"].metric == "classification"
    assert SUBSETS["passage_count"].metric == "count" and SUBSETS["passage_retrieval_en"].metric == "retrieval"
    assert SUBSETS["lcc"].metric == SUBSETS["repobench-p"].metric == "code_sim"
    for subset in SUBSETS.values():
        assert subset.template.count("{context}") == 1


def test_the_prompt_is_the_official_template_split_after_the_document(narrativeqa, tokenizer):
    task = fitness.get_task("longbench", data_file=narrativeqa)
    assert task.subset == "narrativeqa" and task.metric == "qa_f1"
    inst = task.instances("search", 1, 0, None, tokenizer)[0]
    src = next(r for r in map(json.loads, open(narrativeqa)) if r["_id"] == inst.metadata["id"])
    assert inst.prompt == SUBSETS["narrativeqa"].template.format(context=src["context"], input=src["input"])
    assert inst.context.endswith(src["context"])
    assert inst.question.startswith("\n\nNow, answer the question") and inst.question.endswith("Answer:")
    assert inst.max_new_tokens == 128 and inst.references == ("Ada Lovelace",)


def test_a_long_prompt_is_cut_in_the_middle_of_the_context_and_keeps_the_question(tmp_path, tokenizer):
    long_context = "BEGINNING. " + " ".join(f"Filler sentence number {i}." for i in range(600)) + " THE END."
    path = write(tmp_path / "qasper.jsonl", [record(i, context=long_context, dataset="qasper") for i in range(12)])
    [inst] = fitness.get_task("longbench", data_file=path).instances("search", 1, 0, 512, tokenizer)
    assert inst.metadata["truncated"] and len(tokenizer.encode(inst.prompt, add_special_tokens=False)) <= 512
    assert inst.context.startswith("You are given a scientific article") and "BEGINNING." in inst.context
    assert inst.context.endswith("THE END.") and "Filler sentence number 300." not in inst.context
    assert inst.question.endswith("Question: " + inst.question.split("Question: ")[1])


def test_few_shot_subsets_score_only_the_first_line(tmp_path, tokenizer):
    path = write(tmp_path / "triviaqa.jsonl", [record(i, dataset="triviaqa") for i in range(12)])
    task = fitness.get_task("longbench", data_file=path)
    [inst] = task.instances("heldout", 1, 0, None, tokenizer)
    assert task.score(inst, "\nAda Lovelace\nQuestion: who else?") == (1.0, 1.0)


def test_classification_uses_the_record_classes(tmp_path, tokenizer):
    classes = ["Date", "Number", "Human"]
    path = write(tmp_path / "trec.jsonl",
                 [record(i, dataset="trec", answers=["Human"], all_classes=classes) for i in range(12)])
    task = fitness.get_task("longbench", data_file=path)
    [inst] = task.instances("search", 1, 0, None, tokenizer)
    assert task.score(inst, "Human") == (1.0, 1.0)
    assert task.score(inst, "Human or Date") == (0.5, 0.5)


def test_subset_can_come_from_a_data_dir_and_a_display_name(tmp_path, narrativeqa):
    task = fitness.get_task("longbench", subset="NarrativeQA", data_dir=str(tmp_path))
    assert task.subset == "narrativeqa" and len(task.records) == 40


def test_the_splits_are_disjoint_and_the_same_seed_repeats(narrativeqa, tokenizer):
    task = fitness.get_task("longbench", data_file=narrativeqa)
    search = task.instances("search", 10, 1, None, tokenizer)
    heldout = task.instances("heldout", 10, 1, None, tokenizer)
    assert not {i.metadata["id"] for i in search} & {i.metadata["id"] for i in heldout}
    assert search == task.instances("search", 10, 1, None, tokenizer)


def test_asking_for_more_instances_than_the_split_holds_is_an_error(narrativeqa, tokenizer):
    with pytest.raises(fitness.FitnessError, match="search split holds"):
        fitness.get_task("longbench", data_file=narrativeqa).instances("search", 40, 0, None, tokenizer)


# --- bad files: one clear error naming file, line and field ---------------------------------
def test_a_malformed_line_names_the_file_and_line(tmp_path):
    path = write(tmp_path / "narrativeqa.jsonl", [record(0), record(1), '{"input": "broken",'])
    with pytest.raises(FitnessDataError) as err:
        fitness.get_task("longbench", data_file=path)
    assert str(err.value).startswith(f"{path}:3: not valid JSON")
    assert err.value.line == 3


@pytest.mark.parametrize("field", ["input", "context", "answers"])
def test_a_missing_field_names_file_line_and_field(tmp_path, field):
    bad = record(1)
    del bad[field]
    path = write(tmp_path / "narrativeqa.jsonl", [record(0), bad])
    with pytest.raises(FitnessDataError) as err:
        fitness.get_task("longbench", data_file=path)
    assert str(err.value) == f"{path}:2: field {field!r}: missing"


def test_a_field_of_the_wrong_type_is_named(tmp_path):
    path = write(tmp_path / "narrativeqa.jsonl", [record(0, answers="Ada")])
    with pytest.raises(FitnessDataError, match=r":1: field 'answers': expected a non-empty list"):
        fitness.get_task("longbench", data_file=path)


def test_an_unknown_subset_lists_the_valid_ones(tmp_path):
    with pytest.raises(fitness.FitnessError, match="unknown LongBench subset 'dureader'.*narrativeqa, qasper"):
        fitness.get_task("longbench", subset="dureader", data_dir=str(tmp_path))
    path = write(tmp_path / "mine.jsonl", [record(0, dataset="lsht")])
    with pytest.raises(FitnessDataError, match=r"mine.jsonl:1: field 'dataset': unknown LongBench subset 'lsht'"):
        fitness.get_task("longbench", data_file=path)


def test_a_record_of_another_subset_is_caught(tmp_path):
    path = write(tmp_path / "narrativeqa.jsonl", [record(0), record(1, dataset="qasper")])
    with pytest.raises(FitnessDataError, match=r":2: field 'dataset': 'qasper'"):
        fitness.get_task("longbench", data_file=path)


def test_subset_specific_fields_are_checked(tmp_path):
    path = write(tmp_path / "trec.jsonl", [record(0, dataset="trec", all_classes=None)])
    with pytest.raises(FitnessDataError, match=r":1: field 'all_classes'"):
        fitness.get_task("longbench", data_file=path)
    path = write(tmp_path / "passage_retrieval_en.jsonl", [record(0, dataset="passage_retrieval_en", answers=["12"])])
    with pytest.raises(FitnessDataError, match=r":1: field 'answers': each answer must name"):
        fitness.get_task("longbench", data_file=path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FitnessDataError, match="no such file"):
        fitness.get_task("longbench", data_file=str(tmp_path / "narrativeqa.jsonl"))
