"""The one scorer core names itself, and the old name it still answers to.

Core sits below the scorers (``runtime.scorers``), yet two of its rules only work with one of them:
the ``global-topk`` method (``core/baselines/global_topk.py``) and the top-up expansions
(``core/topup.py``) compare scores across layers and heads, and only the retention gates' scores are
on one scale there. The scorer registry takes its old names from ``SCORER_ALIASES``, so each is
written once. A recipe or allocation file may still say ``gates``; compare names through
``canonical_scorer``, never as written.
"""

from __future__ import annotations

#: The trained retention gates (paper 001; ``runtime/scorers/retention_gates.py``).
RETENTION_GATES = "retention-gates"

#: The learned policy (``runtime/scorers/learned.py``).
LEARNED = "learned"

#: The per-step eviction policy trained with PPO (paper 003; ``runtime/scorers/ppo_policy.py``).
PPO_POLICY = "ppo-policy"

#: Old scorer name -> current name.
SCORER_ALIASES = {"gates": RETENTION_GATES}

#: The scorers that rank with a trained checkpoint, by current name -> their checkpoint kind (the
#: default file under the cache directory: ``core.paths.CHECKPOINT_FILES``). A recipe names the file a
#: method of the run reads under ``checkpoints`` (``core/baselines/composed.py: reading_checkpoints``).
CHECKPOINT_KINDS = {RETENTION_GATES: "gates", LEARNED: "learned", PPO_POLICY: "ppo"}


def canonical_scorer(name: str) -> str:
    """The current name of scorer ``name`` (itself unless it is an old name; nothing is checked)."""
    return SCORER_ALIASES.get(name, name)


def reads_checkpoint(name: str) -> bool:
    """Whether scorer ``name`` (current or old name) ranks with a trained checkpoint."""
    return canonical_scorer(name) in CHECKPOINT_KINDS


__all__ = ["CHECKPOINT_KINDS", "LEARNED", "PPO_POLICY", "RETENTION_GATES", "SCORER_ALIASES", "canonical_scorer",
           "reads_checkpoint"]
