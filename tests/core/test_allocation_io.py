import json

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import allocation_to_json, load_allocation, save_allocation, schema
from evolalloc.core.baselines import make_baseline
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry

SMOLLM = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=64, max_positions=8192)
TINY = ModelGeometry(num_layers=3, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=128)


def searched():
    rng = np.random.default_rng(0)
    budgets = rng.integers(16, 400, size=(30, 3))
    alloc = Allocation(
        model="HuggingFaceTB/SmolLM2-135M-Instruct", geometry=SMOLLM, scorer="snapkv",
        scorer_params={"window": 32, "kernel": 7}, target=128, granularity="head", budgets=budgets,
        provenance={
            "method": "evolved", "task": "passkey", "fitness": np.float64(1.17), "task_score": 0.9,
            "cache_score": 1.0, "lam": 0.3, "gamma": 0.2, "group_size": 8, "population": np.int64(10),
            "sigma0": 0.3, "seed": 0, "evaluations": 480, "optimizer": "pycma", "optimizer_version": "4.5.0",
        },
    )
    return alloc.complete()


def test_save_then_load_gives_back_the_same_allocation(tmp_path):
    original = searched()
    path = save_allocation(original, tmp_path / "runs" / "alloc.json")
    loaded = load_allocation(path, expect_geometry=SMOLLM)
    assert loaded.budgets.dtype == np.int64
    assert np.array_equal(loaded.budgets, original.budgets)
    for name in ("model", "geometry", "scorer", "scorer_params", "target", "granularity", "provenance"):
        assert getattr(loaded, name) == getattr(original, name), name
    assert loaded.provenance["fitness"] == 1.17 and loaded.provenance["population"] == 10


def test_every_baseline_survives_a_round_trip(tmp_path):
    for alloc in (make_baseline(name).allocation(TINY, 10) for name in ("uniform", "pyramid", "streaming")):
        loaded = load_allocation(save_allocation(alloc, tmp_path / "a.json"))
        assert np.array_equal(loaded.budgets, alloc.budgets) and loaded.provenance == alloc.provenance


def test_the_file_is_versioned_and_has_one_budget_row_per_line(tmp_path):
    text = allocation_to_json(searched())
    data = json.loads(text)
    assert (data["format"], data["version"]) == ("evolalloc.allocation", 1)
    assert data["target"] == 128 and isinstance(data["target"], int)
    assert sum(1 for line in text.splitlines() if line.strip().startswith("[") and line.rstrip(",").endswith("]")) == 30


def test_the_published_schema_is_draft_2020_12_and_accepts_what_we_write():
    import jsonschema

    published = schema()
    assert published["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(published)
    jsonschema.Draft202012Validator(published).validate(json.loads(allocation_to_json(searched())))


def test_the_method_enum_is_evolved_and_every_registered_baseline_and_the_file_lists_the_built_in_ones():
    from evolalloc.core.allocation_file import _schema_text
    from evolalloc.core.baselines import methods

    # Every method by its current name, then the rules' old names (an old file says gates).
    assert schema()["$defs"]["provenance"]["properties"]["method"]["enum"] == [*methods(), "gates"]
    on_disk = json.loads(_schema_text())["$defs"]["provenance"]["properties"]["method"]["enum"]
    assert on_disk == ["evolved", "cake", "evolved+adakv", "full", "global-topk", "lukv", "pyramid", "pyramid+adakv",
                       "pyramid-snapkv", "streaming", "uniform", "uniform+adakv", "uniform-snapkv",
                       "gates"] == [*methods(), "gates"]


def test_a_file_of_a_new_composition_round_trips_under_its_label(tmp_path):
    profile = make_baseline("pyramid+cake").allocation(TINY, 10)
    save_allocation(profile, tmp_path / "p.json")
    loaded = load_allocation(tmp_path / "p.json")
    assert loaded.provenance["method"] == "pyramid+cake"
    assert loaded.provenance["composition"] == {"allocation": "pyramid", "scorer": None, "adapter": "cake"}


def test_save_replaces_the_file_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "alloc.json"
    save_allocation(make_baseline("uniform").allocation(TINY, 10), path)
    save_allocation(make_baseline("uniform").allocation(TINY, 20), path)
    assert load_allocation(path).target == 20
    assert [p.name for p in tmp_path.iterdir()] == ["alloc.json"]


def test_a_value_json_cannot_hold_fails_the_save_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "alloc.json"
    save_allocation(make_baseline("uniform").allocation(TINY, 10), path)
    broken = make_baseline("uniform").allocation(TINY, 20, provenance={"fitness": float("nan")})
    with pytest.raises(ValueError):
        save_allocation(broken, path)
    assert load_allocation(path).target == 10
    assert [p.name for p in tmp_path.iterdir()] == ["alloc.json"]


# -- malformed files: one clear message naming the file and the field -------------------------


def good_document() -> dict:
    return json.loads(allocation_to_json(make_baseline("uniform").allocation(TINY, 10, model="tiny")))


def edit(change):
    def make():
        data = good_document()
        change(data)
        return json.dumps(data)

    return make


def set_path(*keys_and_value):
    *keys, value = keys_and_value

    def change(data):
        target = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return change


def drop(key):
    return lambda data: data.pop(key)


MALFORMED = {
    "trailing comma": (lambda: '{"format": "evolalloc.allocation",\n "version": 1,\n}', "line 3, column 1",
                       "not valid JSON"),
    "not an object": (lambda: "[1, 2, 3]", "$", "JSON object"),
    "NaN": (lambda: json.dumps(good_document()).replace('"target": 10', '"target": NaN'), None, "NaN"),
    "other format": (edit(set_path("format", "kvpress.budgets")), "$.format", "not an evolalloc allocation file"),
    "no format": (edit(drop("format")), "$.format", "no 'format' field"),
    "newer version": (edit(set_path("version", 4)), "$.version", "newer evolalloc"),
    "decode interval of 0": (edit(set_path("decode", {"interval": 0})), "$.decode.interval", "must be >= 1, got 0"),
    "decode without interval": (edit(set_path("decode", {"every": 16})), "$.decode.interval",
                                "missing required field"),
    "missing budgets": (edit(drop("budgets")), "$.budgets", "missing required field"),
    "missing geometry field": (edit(lambda d: d["geometry"].pop("head_dim")), "$.geometry.head_dim",
                               "missing required field"),
    "unknown top-level key": (edit(set_path("budget", [])), "$.budget", "unknown field (did you mean 'budgets'?"),
    "unknown geometry key": (edit(set_path("geometry", "num_heads", 4)), "$.geometry.num_heads", "unknown field"),
    "target as a string": (edit(set_path("target", "10")), "$.target", "must be a number, got a string"),
    "zero target": (edit(set_path("target", 0)), "$.target", "must be > 0"),
    "negative budget": (edit(set_path("budgets", [[10, 10], [10, 10], [-3, -3]])), "$.budgets[2][0]", "must be >= 0"),
    "fractional budget": (edit(set_path("budgets", [[10.5, 10.5], [10, 10], [10, 10]])), "$.budgets[0][0]",
                          "must be an integer"),
    "boolean budget": (edit(set_path("budgets", [[10, 10], [True, True], [10, 10]])), "$.budgets[1][0]",
                       "must be an integer, got a boolean"),
    "too few layers": (edit(set_path("budgets", [[10, 10], [10, 10]])), "$.budgets",
                       "2 rows (layers) but geometry.num_layers is 3"),
    "too many heads": (edit(set_path("budgets", [[10, 10], [10, 10, 10], [10, 10]])), "$.budgets[1]",
                       "3 entries (KV heads) but geometry.num_kv_heads is 2"),
    "unequal heads at layer granularity": (edit(set_path("budgets", [[10, 12], [10, 10], [10, 10]])), "$.budgets[0]",
                                           "granularity is 'layer'"),
    "unknown granularity": (edit(set_path("granularity", "block")), "$.granularity", 'must be one of "layer", "head"'),
    "unknown method": (edit(set_path("provenance", "method", "magic")), "$.provenance.method", "must be one of"),
    "uneven query heads": (edit(set_path("geometry", "num_query_heads", 3)), "$.geometry.num_query_heads",
                           "cannot be shared evenly"),
    "scorer params not an object": (edit(set_path("scorer_params", [32])), "$.scorer_params", "must be an object"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_file_gives_one_message_naming_the_file_and_the_field(tmp_path, case):
    make_text, field, words = MALFORMED[case]
    path = tmp_path / "broken.json"
    path.write_text(make_text())
    with pytest.raises(UserError) as err:
        load_allocation(path)
    assert err.value.source == str(path)
    assert err.value.field == field
    assert str(path) in str(err.value)
    if field:
        assert field in str(err.value)
    assert words in str(err.value)
    assert "\n" not in str(err.value)


def test_a_profile_for_another_geometry_says_what_it_was_made_for(tmp_path):
    path = save_allocation(searched(), tmp_path / "alloc.json")
    other = ModelGeometry(num_layers=24, num_query_heads=32, num_kv_heads=8, head_dim=64, max_positions=8192)
    with pytest.raises(UserError) as err:
        load_allocation(path, expect_geometry=other)
    assert err.value.field == "$.geometry"
    assert "made for 30 layers × 3 KV heads, this model has 24 × 8" in str(err.value)


def test_a_profile_for_another_head_dim_is_refused_but_another_dtype_is_not(tmp_path):
    path = save_allocation(searched(), tmp_path / "alloc.json")
    wider = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=128, max_positions=8192)
    with pytest.raises(UserError) as err:
        load_allocation(path, expect_geometry=wider)
    assert err.value.field == "$.geometry.head_dim"
    bf16 = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=64, max_positions=4096,
                         dtype_bytes=2)
    assert load_allocation(path, expect_geometry=bf16).geometry == SMOLLM


def test_a_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_allocation(tmp_path / "nope.json")


def expand_cli(tmp_path, allocation: Allocation, *targets: str, extra=()):
    from tests.clitools import run_cli, snapshot

    path = save_allocation(allocation, tmp_path / "profile" / "A.json")
    before = snapshot(path.parent)
    result = run_cli("expand", path, *[a for t in targets for a in ("--to", t)], *extra)
    return path, result, before, snapshot(path.parent)


@pytest.mark.parametrize(
    ("targets", "phrase"),
    [
        (("16",), "16 is not above the searched target 128: a profile is only carried to larger budgets"),
        (("256", "64"), "64 is not above the searched target 128"),  # checked before anything is written
        (("128",), "not above the searched target 128"),
    ],
)
def test_expand_refuses_targets_not_above_the_searched_one_and_writes_nothing(tmp_path, targets, phrase):
    from tests.clitools import assert_refused

    path, result, before, after = expand_cli(tmp_path, searched(), *targets)
    assert_refused(result, source=str(path), field="--to", phrase=phrase)
    assert after == before


@pytest.mark.parametrize(("scorer", "params", "kept"), [("snapkv", {"window": 32}, 32), ("streaming", {}, None)])
def test_expand_refuses_a_target_below_what_the_scorer_always_keeps(tmp_path, scorer, params, kept):
    from evolalloc.runtime.scorers import get_scorer
    from tests.clitools import assert_refused

    kept = get_scorer(scorer, **params).always_kept  # asked, not hard-coded
    assert kept > 2
    # A (bad) profile searched below the floor: any target between it and the floor is refused.
    low = make_baseline("uniform").allocation(TINY, 2, scorer=scorer, scorer_params=params)
    path, result, before, after = expand_cli(tmp_path, low, str(kept - 1))
    assert_refused(result, source=str(path), field="--to", phrase=f"below the {kept} tokens every unit must keep")
    assert after == before


def test_expanded_budgets_never_go_below_what_the_scorer_always_keeps(tmp_path):
    from tests.clitools import run_cli

    budgets = np.array([[1, 40], [2, 60], [40, 49]])  # a profile that starves some heads
    alloc = Allocation(model="m", geometry=TINY, scorer="snapkv", scorer_params={"window": 32}, target=32,
                       granularity="head", budgets=budgets, provenance={"method": "uniform"}).complete()
    path = save_allocation(alloc, tmp_path / "A.json")
    result = run_cli("expand", path, "--to", "40")
    assert result.code == 0, result.stderr
    expanded = load_allocation(tmp_path / "allocation-c40.json")
    assert expanded.budgets.min() >= 32 and expanded.total == 40 * 3 * 2


def test_a_run_folders_searched_profile_is_its_smallest_budget_whatever_the_file_names(tmp_path):
    from evolalloc.config.run_folder import searched_profile

    profile = searched()
    # Written in no particular order; the expansions are larger budgets of the same profile.
    save_allocation(profile.expand(256), tmp_path / "allocation-c256.json")
    save_allocation(profile, tmp_path / "allocation-c128.json")
    save_allocation(profile.expand(160), tmp_path / "allocation-c160.json")
    assert searched_profile(tmp_path).target == 128
    assert np.array_equal(searched_profile(tmp_path).budgets, profile.budgets)


def test_a_folder_without_profiles_is_named_as_not_a_finished_run(tmp_path):
    from evolalloc.config.run_folder import searched_profile

    with pytest.raises(UserError, match="not a finished run folder") as caught:
        searched_profile(tmp_path)
    assert str(tmp_path) in str(caught.value)


def test_a_sliding_window_profile_is_version_2_and_refused_for_a_model_with_other_windows(tmp_path):
    from evolalloc.core.allocation_file import check_geometry, load_allocation, save_allocation
    from evolalloc.core.baselines import make_baseline
    from evolalloc.core.errors import UserError
    from evolalloc.core.geometry import ModelGeometry

    sliding = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096,
                            windows=(16, None, 16, None))
    profile = make_baseline("uniform").allocation(sliding, 32)
    assert profile.budgets[:, 0].tolist() == [15, 49, 15, 49]  # capped at W - 1, the rest to the full layers
    path = save_allocation(profile, tmp_path / "a.json")
    assert json.loads(path.read_text())["version"] == 2
    loaded = load_allocation(path, expect_geometry=sliding)
    assert loaded.geometry.windows == (16, None, 16, None)
    other = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)
    with pytest.raises(UserError, match=r"windows = \(16, None, 16, None\), this model has None"):
        check_geometry(loaded, other, source="a.json")


def test_a_profile_held_while_decoding_is_written_as_version_3_and_read_back_with_its_interval(tmp_path):
    from evolalloc.core.decode_eviction import DecodeEviction

    held = make_baseline("uniform").allocation(TINY, 10)
    held.decode = DecodeEviction(16)
    path = save_allocation(held, tmp_path / "held.json")
    data = json.loads(path.read_text())
    assert (data["version"], data["decode"]) == (3, {"interval": 16})
    assert load_allocation(path).decode == DecodeEviction(16)
    # Carried through completion and expansion (the same budgets, held the same way).
    assert held.complete().decode == held.expand(20).decode == DecodeEviction(16)


def test_a_file_without_a_decode_section_loads_as_prompt_only_and_is_written_as_before(tmp_path):
    document = good_document()
    assert "decode" not in document and document["version"] == 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document))
    assert load_allocation(path).decode is None
    document["decode"] = None
    path.write_text(json.dumps(document))
    assert load_allocation(path).decode is None
