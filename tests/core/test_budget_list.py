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
