"""The settings of training the PPO eviction policy (``learned/ppo_train.py``), defined once and torch-free,
so ``evolalloc ppo train`` takes its defaults from here instead of repeating them.

The defaults are sized for one CPU thread and the bundled SmolLM2-135M: ~10 s per update, so 60 updates
are ~10 minutes (``results`` of the lead's comparison: 3 seeds).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from evolalloc.core.errors import UserError


@dataclass
class PPOSettings:
    """What one training run does.

    The pool: ``prompts`` prompts of exactly ``prompt_tokens`` tokens of the bundled prose of ``split``,
    each continued by the full cache for ``continuation`` greedy tokens (the teacher). An update: for
    ``prompts_per_update`` prompts, one budget of ``budgets`` each, ``rollouts`` episodes each (the
    per-step baseline of one is the other episodes' mean return at that step); every (layer, KV head)
    holds the budget while the continuation is teacher-forced, evicting every ``interval`` tokens.
    Then ``epochs`` passes of the clipped objective (``clip``) at learning rate ``lr``, returns
    discounted by ``gamma``, an entropy bonus of weight ``entropy``. The network: ``depth`` hidden
    layers of ``hidden`` units. ``reward``: ``"logprob"``, per step the log-probability the compressed
    cache gives the full cache's next token minus the full cache's own (paper 003's teacher forcing /
    distillation with cross-entropy: 0 is as good as the full cache).
    """

    prompts: int = 24
    prompt_tokens: int = 256
    continuation: int = 48
    budgets: tuple[int, ...] = (64, 96)
    interval: int = 4
    prompts_per_update: int = 2
    rollouts: int = 4
    updates: int = 60
    epochs: int = 4
    clip: float = 0.2
    lr: float = 1e-2
    gamma: float = 0.95
    entropy: float = 0.01
    hidden: int = 32
    depth: int = 2
    reward: str = "logprob"
    split: str = "search"
    seed: int = 0

    def __post_init__(self):
        self.budgets = tuple(int(b) for b in self.budgets)
        rules = {  # field: (holds, what it must be)
            "prompts": (self.prompts >= self.prompts_per_update, "at least prompts_per_update"),
            "prompts_per_update": (self.prompts_per_update >= 1, ">= 1"),
            "prompt_tokens": (self.prompt_tokens >= 8, ">= 8"), "continuation": (self.continuation >= 3, ">= 3"),
            "budgets": (bool(self.budgets) and min(self.budgets) >= 1, "budgets >= 1"),
            "interval": (self.interval >= 1, ">= 1"), "rollouts": (self.rollouts >= 2, ">= 2 (the baseline)"),
            "updates": (self.updates >= 1, ">= 1"), "epochs": (self.epochs >= 1, ">= 1"),
            "clip": (0 < self.clip < 1, "in (0, 1)"), "lr": (self.lr > 0, "> 0"),
            "gamma": (0 < self.gamma <= 1, "in (0, 1]"), "entropy": (self.entropy >= 0, ">= 0"),
            "hidden": (self.hidden >= 1, ">= 1"), "depth": (self.depth >= 1, ">= 1"),
            "reward": (self.reward == "logprob", "'logprob'"), "split": (self.split in ("search", "heldout"),
                                                                         "'search' or 'heldout'"),
        }
        for name, (holds, rule) in rules.items():
            if not holds:
                raise UserError(f"{getattr(self, name)!r} must be {rule}", field=f"ppo {name}")

    def to_dict(self) -> dict:
        return asdict(self)
