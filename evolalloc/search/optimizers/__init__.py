"""Ask/tell optimizer back-ends for the search loop: pycma ("cma"), Optuna CMA-ES, Optuna TPE, and a
random-search control ("random")."""

from evolalloc.search.optimizers.base import (
    OPTIMIZERS,
    AskTellOptimizer,
    check_optimizer_name,
    check_optimizer_options,
    get_optimizer,
    optimizer_names,
    register_optimizer,
)

__all__ = ["OPTIMIZERS", "AskTellOptimizer", "check_optimizer_name", "check_optimizer_options", "get_optimizer",
           "optimizer_names", "register_optimizer"]
