"""Registries: names, errors that list the valid names, parameters, and the leaf-package rule."""

import subprocess
import sys
from dataclasses import FrozenInstanceError

import pytest

import fitness
from fitness import FitnessDataError, FitnessError, Instance, Task, get_metric, get_task, register_metric, register_task


def test_every_task_of_the_issue_is_registered():
    expected = {"passkey", "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery",
                "variable_tracking", "cwe", "fwe", "niah", "longbench", "gsm8k", "jsonl_qa",
                "jsonl_prompts", "continue_prose", "repeat_passage"}  # fmt: skip
    assert expected == set(fitness.list_tasks())


def test_every_registered_task_names_a_registered_metric_and_has_a_one_line_description():
    from fitness.registry import task_class

    for name in fitness.list_tasks():
        cls = task_class(name)
        assert cls.metric in fitness.list_metrics(), name
        assert cls.description and "\n" not in cls.description, name
        assert cls.version >= 1


def test_an_unknown_task_lists_the_valid_names_and_suggests_the_closest():
    with pytest.raises(FitnessError) as err:
        get_task("paskey")
    message = str(err.value)
    assert "'paskey'" in message and "did you mean 'passkey'" in message
    assert ", ".join(fitness.list_tasks()) in message


def test_an_unknown_metric_lists_the_valid_names():
    with pytest.raises(ValueError) as err:
        get_metric("rouge")
    assert ", ".join(fitness.list_metrics()) in str(err.value)


def test_registering_a_name_twice_raises():
    with pytest.raises(ValueError, match="already registered"):

        @register_metric("qa_f1")
        def again(prediction, references):  # noqa: F841
            return 0.0

    with pytest.raises(ValueError, match="already registered"):

        @register_task("passkey")
        class Again(Task):  # noqa: F841
            pass


def test_an_unknown_task_parameter_is_an_error_listing_the_valid_ones():
    with pytest.raises(FitnessError) as err:
        get_task("passkey", needle_typ="uuid")
    assert "'needle_typ'" in str(err.value) and "prompt_style" in str(err.value)


def test_bad_parameter_values_are_rejected_with_the_valid_choices():
    with pytest.raises(FitnessError, match="number, word, uuid"):
        get_task("niah_single", needle_type="emoji")
    with pytest.raises(FitnessError, match="raw, chat"):
        get_task("passkey", prompt_style="fancy")


def test_an_instance_prompt_is_its_context_then_its_question_and_it_is_frozen():
    inst = Instance(uid="t/search/1/0", task="t", split="search", context="abc ", question="q?", references=["x"],
                    max_new_tokens=4)
    assert inst.prompt == "abc q?"
    assert inst.references == ("x",)
    with pytest.raises(FrozenInstanceError):
        inst.context = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        inst.metadata["depth"] = 1  # type: ignore[index]
    assert len({inst, inst}) == 1  # hashable: usable as a cache key


def test_a_data_error_names_file_line_and_field_and_is_a_value_error():
    err = FitnessDataError("missing", file="data.jsonl", line=3, field="answers")
    assert str(err) == "data.jsonl:3: field 'answers': missing"
    assert isinstance(err, ValueError)


def test_the_common_score_of_a_lower_is_better_metric_is_flipped():
    class Loss(Task):
        metric = "test_fraction_wrong"

    register_metric("test_fraction_wrong", higher_is_better=False)(lambda p, refs: 0.25)
    try:
        inst = Instance(uid="u", task="t", split="search", context="", question="", references=("a",), max_new_tokens=1)
        assert Loss().score(inst, "a") == (0.25, 0.75)
    finally:
        fitness.registry.METRICS.remove("test_fraction_wrong")


def test_an_unknown_task_is_the_one_registry_error_type_and_a_fitness_error():
    from evolalloc import registry

    with pytest.raises(registry.UnknownNameError) as err:
        get_task("paskey")
    assert isinstance(err.value, FitnessError)


def test_fitness_imports_only_the_registry_from_evolalloc():
    # fitness is a leaf: of evolalloc it may load only the bottom floor (the package's bare
    # __init__ and the generic registry), never torch-heavy or higher layers.
    code = ("import sys, fitness; bad = [m for m in sys.modules if m.split('.')[0] == 'evolalloc'"
            " and m not in ('evolalloc', 'evolalloc.registry')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tasks_and_metrics_are_found_by_file_with_no_import_list():
    # Importing fitness imports no task or metric file; asking for a name finds its file.
    code = ("import sys, fitness\n"
            "files = lambda: sorted(m for m in sys.modules if m.startswith(('fitness.tasks.', 'fitness.metrics.')))\n"
            "assert files() in ([], ['fitness.metrics.normalize']), files()\n"
            "fitness.get_task('passkey'); fitness.get_metric('qa_f1')\n"
            "assert {'fitness.tasks.passkey', 'fitness.metrics.qa'} <= set(files()), files()\n")
    subprocess.run([sys.executable, "-c", code], check=True)
