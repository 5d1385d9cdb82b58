"""Anchored gates trained on the answer (``scorer.train.objective: answer``): the full cache's answer
as the target, a step lowers the answer's loss, and in a run the training reads the search split
only, is cached by content (the objective is part of the key) and deterministic."""

from __future__ import annotations

import pytest
import torch

from evolalloc.learned.answer_train import answer_loss, answer_target, soft_top_k
from evolalloc.learned.gates_train import GatesTrainConfig, item_anchor, item_tensors, train_gates
from evolalloc.learned.in_run import InRunSettings
from evolalloc.learned.traces import load_traces, trace_ids
from evolalloc.pipeline.scorer_training import training_key
from evolalloc.runtime.gates import GatesConfig, RetentionGates
from tests.learned.test_anchored_training import anchored_recipe
from tests.learned.test_in_run_training import train, trained_twice_then_cached
from tests.learned.test_query_aware_training import write_folder
from tests.runtime.conftest import random_prompt, tiny_model

W, N = 16, 180  # votes window; prompt length (write_folder's prompt_len)


class DigitTokenizer:
    """Decodes token ``t`` as the text ``<t>``: a reference is "produced" once its token appears."""

    def decode(self, ids):
        return "".join(f"<{t}>" for t in ids)


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def records(model):
    out = []
    for seed in (1, 2):
        ids = random_prompt(N + 6, seed=seed).tolist()
        record = trace_ids(model, ids, [N], 16, votes=W)
        record["answer_target"] = answer_target(model, DigitTokenizer(), record, N, [], 5)
        out.append(record)
    return out


def test_the_target_is_the_full_caches_greedy_answer_cut_once_every_reference_appears(model, records):
    record = records[0]
    target = record["answer_target"]
    assert len(target) == 5  # no reference: the full cache's answer of answer_tokens tokens
    with torch.no_grad():  # greedy continuation of the prompt by the model itself, token by token
        ids = record["ids"][:N].long()
        for t in target:
            assert int(model(input_ids=ids[None]).logits[0, -1].argmax()) == int(t)  # float16 cache: same argmax here
            ids = torch.cat([ids, t[None]])
    cut = answer_target(model, DigitTokenizer(), record, N, [f"<{int(target[2])}>"], 5)
    assert torch.equal(cut, target[: 1 + next(i for i, t in enumerate(target.tolist()) if t == int(target[2]))])


def test_the_soft_top_k_keeps_about_k_entries_globally_or_per_head():
    scores = torch.randn(6, 50) * 4 + torch.arange(6.0)[:, None]  # heads on different scales
    log_r, used, allowed = soft_top_k(scores, 10, uniform=False, temperature=0.01)
    assert allowed == 60 and abs(float(used) - 60) < 1.0
    # global: heads keep different counts (the K-th itself: r = 0.5)
    assert (log_r.exp() >= 0.5).sum(dim=1).tolist() != [10] * 6
    log_r, used, allowed = soft_top_k(scores, 10, uniform=True, temperature=0.01)
    assert allowed == 60 and (log_r.exp() >= 0.5).sum(dim=1).tolist() == [10] * 6


def config(**changes) -> GatesTrainConfig:
    return GatesTrainConfig(**{**dict(steps=12, hidden=4, capacities=(40, 60), sinks=0, window=W, log_every=100,
                                      votes=W,
                                      anchored=True, residual=False, objective="answer", lr=3e-2, warmup=1), **changes})


def batch_loss(gates, traces, model, c, capacity, uniform_too=False):
    trace = traces.traces[0]
    features = item_tensors(traces, (0, 0), c.sinks, c.window, True)[0]
    anchor = item_anchor(traces, (0, 0), c.sinks, c.window)
    return answer_loss(gates, model, trace, features, anchor, capacity, c.sinks, c.window, c.penalty, c.temperature,
                       uniform_too)[0]


@pytest.mark.parametrize("uniform_too", [False, True])
def test_a_training_step_lowers_the_answer_loss_on_its_batch(model, records, tmp_path, uniform_too):
    traces = load_traces(write_folder(tmp_path / "t", records))
    c = config()
    geometry = traces.index["geometry"]
    gates = RetentionGates(GatesConfig(geometry["num_layers"], geometry["num_kv_heads"], geometry["head_dim"], 4, 32, W,
                                       True))
    optimizer = torch.optim.SGD([gates.log_scale, gates.offset], lr=0.5)
    before = batch_loss(gates, traces, model, c, 40, uniform_too)
    before.backward()
    assert gates.log_scale.grad.abs().sum() > 0 and gates.offset.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.parameters())  # the model is frozen: no gradient of its size
    optimizer.step()
    with torch.no_grad():
        after = batch_loss(gates, traces, model, c, 40, uniform_too)
    assert float(after) < float(before.detach())


def test_answer_training_is_deterministic_moves_the_calibration_and_needs_the_model_and_targets(model, records,
                                                                                                tmp_path):
    traces = load_traces(write_folder(tmp_path / "t", records))
    first, summary = train_gates(traces, config(), progress=False, model=model)
    second, _ = train_gates(traces, config(), progress=False, model=model)
    assert all(torch.equal(v, second.state_dict()[k]) for k, v in first.state_dict().items())
    assert first.log_scale.abs().max() > 0 and first.offset.abs().max() > 0 and summary["objective"] == "answer"
    assert "final_answer_nll" in summary and summary["items"] == 2
    with pytest.raises(ValueError, match="through their model"):
        train_gates(traces, config(), progress=False)
    without = load_traces(write_folder(tmp_path / "o",
                                       [{k: v for k, v in r.items() if k != "answer_target"} for r in records]))
    with pytest.raises(ValueError, match="answer_target"):
        train_gates(without, config(), progress=False, model=model)


def test_the_key_of_an_attention_recipe_does_not_move():
    """Pinned from main before the answer objective existed: cached gates keep their folders."""
    anchored = InRunSettings(scorer="gates", steps=600, seed=0, future=32, splits_per_trace=1, min_split=128, hidden=32,
                             horizon=32, capacities=(48, 64, 128), checkpoint_every=50, sinks=0, window=32, votes=32,
                             anchored=True, residual=False)
    identity, geometry = {"model_type": "llama", "fingerprint": "f"}, {"num_layers": 30}
    assert training_key(anchored, identity, geometry,
                        []) == "314021879691cb19f477a3fc9f164997662e72a4734512b09cdc9c125e5e9d4b"
    from dataclasses import replace

    assert training_key(replace(anchored, objective="answer"), identity, geometry,
                        []) != training_key(anchored, identity, geometry, [])


def answer_recipe(tmp_path, model_dir, **changes):
    return anchored_recipe(tmp_path, model_dir,
                           **{"objective": "answer", "splits_per_trace": 1, "residual": False, **changes})


def test_in_run_answer_training_reads_the_search_split_only_and_is_cached_deterministic_and_its_own_key(
        tmp_path, tiny_model_dir, monkeypatch):
    import json

    from evolalloc.pipeline.task_splits import TaskSplits

    generated = []
    real_generate = TaskSplits.generate
    monkeypatch.setattr(TaskSplits, "generate",
                        lambda self, split, n: generated.append(split) or real_generate(self, split, n))
    first, experiment = trained_twice_then_cached(answer_recipe(tmp_path, tiny_model_dir), tmp_path, monkeypatch)
    assert set(generated) == {"search"}  # the held-out split was not even drawn for training
    index = json.loads((first.parent / "traces" / "index.json").read_text())
    search = [inst.uid for inst in experiment.instances("search")]
    assert [entry["uid"] for entry in index["traces"]] == search
    assert not {inst.uid for inst in experiment.instances("heldout")} & set(search)
    saved = torch.load(first, weights_only=True)
    assert saved["config"]["anchored"] is True and saved["training"]["objective"] == "answer"
    with pytest.raises(AssertionError, match="trained again"):  # the attention objective is another key
        train(answer_recipe(tmp_path, tiny_model_dir, objective="attention"))


def test_the_answer_objective_without_anchored_gates_or_at_several_splits_is_one_recipe_error(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.errors import UserError

    cases = [({"anchored": False, "residual": True}, "scorer.train.objective", "set scorer.train.anchored: true"),
             ({"splits_per_trace": 3}, "scorer.train.splits_per_trace", "prompt end only")]
    for changes, field, message in cases:
        with pytest.raises(UserError, match=message) as info:
            load_recipe(answer_recipe(tmp_path, tiny_model_dir, **changes))
        assert info.value.field == field and "\n" not in str(info.value)
