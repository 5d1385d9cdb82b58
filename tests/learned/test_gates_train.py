"""Gate training on toy traces: it learns which tokens matter, under the global capacity."""

from __future__ import annotations

import torch

from evolalloc.learned.gates_train import GatesTrainConfig, gates_loss, item_tensors, train_gates
from tests.learned.conftest import toy_traces


def test_training_lowers_the_attention_lost_under_the_global_capacity():
    traces = toy_traces(6, seed=0, layers=2)
    config = GatesTrainConfig(steps=150, capacities=(40,), sinks=0, window=0, hidden=8, lr=1e-2, seed=0)
    gates, summary = train_gates(traces, config, progress=False)
    item = traces.items[0]
    features, importance, age = item_tensors(traces, item, 0, 0)
    fresh = type(gates)(gates.config)
    fresh.fit_standardisation(features)  # the same kind of standardisation, so only the learning differs
    untrained = gates_loss(fresh, features, importance, age, 40, 0, 0, 1.0)
    trained = gates_loss(gates, features, importance, age, 40, 0, 0, 1.0)
    assert float(trained[0].detach()) < float(untrained[0].detach())
    assert summary["final_used_over_capacity"] < 1.5


def test_retention_follows_importance_after_training():
    traces = toy_traces(6, seed=1, layers=1)
    gates, _ = train_gates(traces, GatesTrainConfig(steps=200, capacities=(30,), sinks=0, window=0, hidden=8, lr=1e-2),
                           progress=False)
    features, importance, age = item_tensors(traces, traces.items[0], 0, 0)
    with torch.no_grad():
        retention = gates.log_retention(features)
    top = importance.argsort(dim=-1, descending=True)[:, :10]
    bottom = importance.argsort(dim=-1)[:, :10]
    assert (retention.gather(1, top).mean(1) > retention.gather(1, bottom).mean(1)).all()


def test_item_tensors_are_the_features_of_the_gathered_tokens_bit_for_bit():
    """The sliced, convert-once features (issue 22) equal gathering the rankable tokens and
    calling ``RetentionGates.features`` — so training on them is unchanged."""
    from evolalloc.runtime.gates import RetentionGates

    traces = toy_traces(2, seed=3, layers=3, kv_heads=2, dim=8)
    for item in traces.items:
        for sinks, window in ((0, 0), (4, 16)):
            trace = traces.traces[item[0]]
            n = int(trace["splits"][item[1]])
            positions = torch.arange(sinks, n - window)
            keys = trace["keys"][:, :, positions].reshape(6, positions.numel(), -1)
            values = trace["values"][:, :, positions].reshape(6, positions.numel(), -1)
            expected = RetentionGates.features(keys, values)
            features, importance, age = item_tensors(traces, item, sinks, window)
            assert features.dtype == torch.float32 and torch.equal(features, expected)
            assert torch.equal(importance, trace["importance"][item[1]][:, :, positions].reshape(6, -1).float())
            assert torch.equal(age, (n - positions).float())
            assert features.is_contiguous() and importance.is_contiguous()  # the layout sums depend on


def test_the_standardisation_sample_is_the_concatenation_of_the_items_features():
    from evolalloc.learned.gates_train import _sample_features

    traces = toy_traces(3, seed=4, layers=2, kv_heads=2, dim=8)
    items = traces.items[:5]
    expected = torch.cat([item_tensors(traces, it, 4, 16)[0] for it in items], dim=1)
    assert torch.equal(_sample_features(traces, items, 4, 16), expected)


def test_training_is_bit_identical_to_training_on_gathered_items(monkeypatch):
    """The whole training with the sliced items equals the one on gathered copies (the code
    before issue 22's change): same weights to the last bit, so a cached run's gates do not move."""
    import evolalloc.learned.gates_train as gates_train
    from evolalloc.runtime.gates import RetentionGates

    def gathered(traces, item, sinks, window, votes=False):
        trace = traces.traces[item[0]]
        n = int(trace["splits"][item[1]])
        layers, kv_heads = trace["keys"].shape[:2]
        positions = torch.arange(sinks, n - window)
        keys = trace["keys"][:, :, positions].reshape(layers * kv_heads, positions.numel(), -1)
        values = trace["values"][:, :, positions].reshape(layers * kv_heads, positions.numel(), -1)
        importance = trace["importance"][item[1]][:, :, positions].reshape(layers * kv_heads, -1).float()
        return RetentionGates.features(keys, values), importance, (n - positions).float()

    traces = toy_traces(8, seed=7, layers=3, kv_heads=2, dim=16, length=200)
    config = GatesTrainConfig(steps=60, capacities=(40, 64), sinks=4, window=16, hidden=8, seed=3)
    sliced, _ = train_gates(traces, config, progress=False)
    monkeypatch.setattr(gates_train, "item_tensors", gathered)
    reference, _ = train_gates(traces, config, progress=False)
    for name, tensor in reference.state_dict().items():
        assert torch.equal(sliced.state_dict()[name], tensor), name


def test_gates_trained_on_lazily_mapped_traces_equal_those_trained_in_memory(tmp_path):
    """``load_traces(lazy=True)`` (in-run gate training) maps one trace at a time; the weights
    are the same to the last bit as with every trace loaded."""
    import json

    from evolalloc.learned.traces import LazyTraces, load_traces

    toy = toy_traces(5, seed=9, layers=2, kv_heads=2, dim=16, length=160)
    entries = []
    for i, trace in enumerate(toy.traces):
        torch.save(trace, tmp_path / f"trace-{i:05d}.pt")
        entries.append({"file": f"trace-{i:05d}.pt", "splits": trace["splits"].tolist()})
    (tmp_path / "index.json").write_text(json.dumps({**toy.index, "traces": entries}))
    lazy = load_traces(tmp_path, lazy=True)
    assert isinstance(lazy.traces, LazyTraces) and lazy.items == toy.items
    assert torch.equal(lazy.traces[3]["keys"], toy.traces[3]["keys"])
    config = GatesTrainConfig(steps=40, capacities=(40, 64), sinks=4, window=16, hidden=8, seed=5)
    mapped, _ = train_gates(lazy, config, progress=False)
    held, _ = train_gates(toy, config, progress=False)
    for name, tensor in held.state_dict().items():
        assert torch.equal(mapped.state_dict()[name], tensor), name
