import pytest

from evolalloc.core.budget_list import parse_budgets
from evolalloc.core.errors import UserError


def test_a_comma_list_of_budgets_reads_as_numbers_in_order_skipping_empty_parts():
    assert parse_budgets("48, 64,,96.5", "--budgets") == [48.0, 64.0, 96.5]


@pytest.mark.parametrize("text", ["48,lots", "", " , ", "48,0", "-8", "nan", "inf"])
def test_anything_but_positive_finite_budgets_is_one_error_naming_the_option(text):
    with pytest.raises(UserError) as caught:
        parse_budgets(text, "--not-worse")
    message = str(caught.value)
    assert message.startswith("--not-worse: ") and repr(text) in message and "\n" not in message


def test_whole_budgets_read_as_ints_and_refuse_fractions_naming_the_option():
    assert parse_budgets("64, 128", "--budgets", whole=True) == [64, 128]
    with pytest.raises(UserError, match=r"^--budgets: must be positive whole numbers"):
        parse_budgets("64,2.5", "--budgets", whole=True)


def test_an_empty_list_is_refused_unless_the_caller_allows_an_empty_sweep():
    assert parse_budgets(" , ", "--extrapolate", whole=True, allow_empty=True) == []
    with pytest.raises(UserError, match=r"^--budgets: must list at least one"):
        parse_budgets(" , ", "--budgets", whole=True)
