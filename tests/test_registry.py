import sys
import types

import pytest

from evolalloc.registry import BadParametersError, DuplicateNameError, Registry, RegistryError, UnknownNameError


def test_a_registered_class_is_found_by_name_and_learns_its_name():
    things = Registry("thing")

    @things.register("alpha", query_free=True)
    class Alpha:
        pass

    assert things.get("alpha") is Alpha
    assert Alpha.name == "alpha"
    assert things.info("alpha") == {"query_free": True}
    assert "alpha" in things and things.names() == ["alpha"] and len(things) == 1


def test_an_unknown_name_suggests_the_closest_and_lists_the_valid_ones():
    things = Registry("scorer")
    for name in ("snapkv", "streaming"):
        things.add(name, object())
    with pytest.raises(UnknownNameError) as err:
        things.get("snapk")
    message = str(err.value)
    assert "unknown scorer 'snapk'" in message
    assert "did you mean 'snapkv'" in message
    assert "valid names: snapkv, streaming" in message
    assert isinstance(err.value, ValueError) and isinstance(err.value, LookupError)


def test_registering_a_different_object_under_a_taken_name_is_refused():
    things = Registry("thing")
    things.register("a")(type("A", (), {}))
    with pytest.raises(DuplicateNameError, match="'a' is already registered"):
        things.register("a")(type("B", (), {}))


def test_the_same_definition_registered_again_is_accepted():
    things = Registry("thing")

    def make():
        class Same:
            pass

        return Same

    first, second = make(), make()  # same module and qualname, as after a module reload
    things.register("same")(first)
    things.register("same")(second)
    assert things.get("same") is second


def test_a_base_class_is_enforced():
    class Base:
        pass

    things = Registry("engine", base=Base)
    with pytest.raises(TypeError, match="subclass of Base"):
        things.register("x")(type("NotBase", (), {}))
    things.register("y")(type("Sub", (Base,), {}))
    assert things.names() == ["y"]


def test_lazy_entries_are_listed_without_import_and_loaded_on_first_use(monkeypatch):
    things = Registry("exporter", lazy={"fake": "fake_plugin_module_for_test"})
    assert things.names() == ["fake"]
    assert "fake_plugin_module_for_test" not in sys.modules

    module = types.ModuleType("fake_plugin_module_for_test")
    imported = []

    def fake_import(name):
        imported.append(name)
        things.register("fake", format="npy")(lambda allocation: "exported")
        return module

    monkeypatch.setattr("importlib.import_module", fake_import)
    assert things.get("fake")(None) == "exported"
    assert things.info("fake") == {"format": "npy"}
    things.get("fake")
    assert imported == ["fake_plugin_module_for_test"]  # imported once


def test_a_lazy_module_that_does_not_register_its_name_is_an_error(monkeypatch):
    things = Registry("engine", lazy={"ghost": "ghost_module"})
    monkeypatch.setattr("importlib.import_module", lambda name: types.ModuleType(name))
    with pytest.raises(RegistryError, match="did not register it"):
        things.get("ghost")


def test_create_checks_parameter_names_before_building():
    things = Registry("scorer")

    @things.register("pooled")
    class Pooled:
        def __init__(self, *, window: int = 32, kernel: int = 7):
            self.window, self.kernel = window, kernel

    assert things.create("pooled", kernel=11).kernel == 11
    assert things.parameters("pooled") == ["window", "kernel"]
    with pytest.raises(BadParametersError, match=r"no parameter 'kernal'; valid parameters: window, kernel"):
        things.create("pooled", kernal=11)


def test_create_reports_a_missing_required_parameter_but_keeps_bugs_inside_the_entry():
    things = Registry("scorer")

    @things.register("needs_path")
    class NeedsPath:
        def __init__(self, *, path: str):
            raise TypeError("a bug inside the constructor")

    with pytest.raises(BadParametersError, match="missing a required"):
        things.create("needs_path")
    with pytest.raises(TypeError, match="a bug inside"):
        things.create("needs_path", path="x")


def test_a_plugin_file_no_lazy_line_names_is_found_by_name(tmp_path, monkeypatch):
    package = tmp_path / "toy_plugins_for_test"
    package.mkdir()
    (package / "__init__.py").write_text("from evolalloc.registry import Registry\nTOYS "
                                         "= Registry('toy', package=__name__)\n")
    (package / "alpha.py").write_text("from toy_plugins_for_test import "
                                      "TOYS\n@TOYS.register('alpha')\nclass Alpha:\n    pass\n")
    (package / "_private.py").write_text("raise RuntimeError('private modules are not plugins')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import toy_plugins_for_test

    toys = toy_plugins_for_test.TOYS
    assert toys.names() == []  # nothing imported yet
    assert toys.get("alpha").name == "alpha"
    toys.check_name("alpha")
    with pytest.raises(UnknownNameError, match="did you mean 'alpha'"):
        toys.check_name("alpah")


def test_check_name_does_not_import_a_lazy_entry():
    things = Registry("optimizer", lazy={"cma": "a_module_that_does_not_exist"})
    things.check_name("cma")
    with pytest.raises(UnknownNameError, match="valid names: cma"):
        things.check_name("cmaes")


def test_a_removed_entry_is_unknown_again_and_a_registry_may_raise_its_own_subclass():
    class TaskNameError(UnknownNameError):
        pass

    things = Registry("task", unknown_error=TaskNameError)
    things.add("passkey", object())
    things.remove("passkey")
    with pytest.raises(TaskNameError):
        things.get("passkey")


def test_a_decorator_written_without_its_name_is_refused_naming_the_idiom():
    # One idiom: ``@register_<kind>("name")``. A bare ``@register_scorer`` hands the class in as
    # the name; that must fail at import with a message that shows the right form.
    from evolalloc.core.baselines import register_baseline
    from evolalloc.runtime.scorers import register_scorer

    class Nameless:
        pass

    with pytest.raises(TypeError, match=r'register_\.\.\.\("name"\)'):
        register_scorer(Nameless)
    with pytest.raises(TypeError, match=r'register_\.\.\.\("name"\)'):
        register_baseline(Nameless)


def test_an_old_name_finds_the_renamed_entry_and_only_the_new_name_is_listed():
    things = Registry("scorer", aliases={"gates": "retention-gates"})

    @things.register("retention-gates", query_free=True)
    class RetentionGates:
        def __init__(self, horizon: int = 0):
            self.horizon = horizon

    assert things.get("gates") is things.get("retention-gates") is RetentionGates
    assert "gates" in things and things.canonical("gates") == "retention-gates"
    assert things.canonical("snapkv") == "snapkv"  # a name that was never renamed is itself
    assert things.info("gates") == {"query_free": True}
    assert things.create("gates", horizon=3).horizon == 3
    things.check_name("gates")
    assert things.names() == ["retention-gates"] and RetentionGates.name == "retention-gates"


def test_an_unknown_name_lists_the_current_names_and_a_typo_of_an_old_one_suggests_its_new_name():
    things = Registry("search space", aliases={"gate_prior": "score_prior"})
    things.add("score_prior", object())
    things.add("layer_groups", object())
    with pytest.raises(UnknownNameError) as err:
        things.get("gate_prio")
    assert "did you mean 'score_prior'" in str(err.value)
    assert str(err.value).endswith("valid names: layer_groups, score_prior")


def test_a_new_entry_may_not_take_an_old_name():
    things = Registry("thing", aliases={"old": "new"})
    with pytest.raises(DuplicateNameError, match="old name of 'new'"):
        things.add("old", object())
