"""``evolalloc tasks``: the list, an example instance, and one-line errors without tracebacks."""

import json
import sys

import pytest

import fitness


@pytest.fixture
def cli(monkeypatch, tokenizer, capsys):
    """Run the console entry point; the model's tokenizer is the test fixture (no weights)."""
    import evolalloc.runtime.model
    from evolalloc.cli import run

    monkeypatch.setattr(evolalloc.runtime.model, "load_tokenizer", lambda spec="": tokenizer)

    def invoke(*args):
        monkeypatch.setattr(sys, "argv", ["evolalloc", *args])
        try:
            run()
            code = 0
        except SystemExit as exit:
            code = exit.code
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def test_bare_tasks_lists_every_task_on_one_line(cli):
    code, out, _ = cli("tasks")
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == len(fitness.list_tasks())
    assert [line.split()[0] for line in lines] == fitness.list_tasks()
    assert any(line.startswith("passkey") and "string_match_all" in line and " likelihood " in line for line in lines)


def test_show_prints_the_prompt_with_its_middle_cut_the_references_and_the_metric(cli, tokenizer):
    code, out, _ = cli("tasks", "show", "passkey", "--context-tokens", "2048", "--seed", "1")
    assert code == 0
    assert "metric: string_match_all" in out and "characters left out" in out
    assert out.count("The grass is green.") < 200  # the 2k-token haystack is not printed whole
    [inst] = fitness.get_task("passkey").instances("search", 1, 1, 2048, tokenizer)
    assert f"- {inst.references[0]}" in out
    assert "What is the pass key? The pass key is" in out
    assert "default fitness mode: likelihood" in out and f"- ' {inst.references[0]}'" in out


def test_show_takes_task_parameters(cli):
    code, out, _ = cli("tasks", "show", "niah_single", "-p", "needle_type=uuid", "--split", "heldout")
    assert code == 0 and "special magic uuids" in out and "heldout" in out


def test_an_unknown_task_is_one_error_line_and_exit_status_2(cli):
    code, out, err = cli("tasks", "show", "paskey")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [err.strip()] and err.startswith("error: unknown task 'paskey'")
    assert "Traceback" not in err


def test_a_bad_data_file_is_one_error_line_naming_file_line_and_field(cli, tmp_path):
    path = tmp_path / "narrativeqa.jsonl"
    path.write_text(json.dumps({"input": "q", "answers": ["a"]}) + "\n", encoding="utf-8")
    code, out, err = cli("tasks", "show", "longbench", "-p", f"data_file={path}")
    assert code == 2 and "Traceback" not in err
    assert err.strip() == f"error: {path}:1: field 'context': missing"


def test_a_bad_line_of_your_own_data_is_one_error_line_and_exit_status_2(cli, tmp_path):
    path = tmp_path / "mine.jsonl"
    good = {"context": "The door was blue.", "question": "What colour was the door?", "answers": ["blue"]}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "answers": "blue"}) + "\n", encoding="utf-8")
    code, out, err = cli("tasks", "show", "jsonl_qa", "-p", f"path={path}")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip() == f"error: {path}:2: field 'answers': expected a non-empty list of strings"
