"""RULER variable tracking: follow a chain of assignments ``VAR B = VAR A`` back to a value.

Each chain starts ``VAR XXXXX = 12345.`` and every hop copies the previous variable; the question
asks for every variable that holds the queried value. Extra chains (``num_chains > 1``) hold other
values and act as distractors.
"""

from __future__ import annotations

import string

from fitness.errors import FitnessError
from fitness.registry import register_task
from fitness.tasks.haystacks import make_haystack
from fitness.tasks.synthetic import Draft, SyntheticTask


@register_task("variable_tracking")
class VariableTracking(SyntheticTask):
    metric = "string_match_all"
    version = 1
    description = "RULER variable tracking: name every variable a chain of assignments gives the value"
    answer_separator = " "  # " AAAAA BBBBB ..." in chain order (likelihood mode, when asked for)
    # generate: string_match_all is already graded (the share of variables named), and the
    # order of the names is the model's choice, which a teacher-forced continuation would fix.

    def __init__(
        self,
        *,
        num_chains: int = 1,
        num_hops: int = 4,
        haystack: str = "noise",
        haystack_dir: str | None = None,
        prompt_style: str = "raw",
        depth: str = "even",
    ):
        super().__init__(prompt_style=prompt_style, depth=depth)
        if num_chains < 1 or num_hops < 1:
            raise FitnessError("variable_tracking needs num_chains >= 1 and num_hops >= 1")
        self.num_chains = num_chains
        self.num_hops = num_hops
        self.haystack = make_haystack(haystack_dir, haystack)

    def draft(self, rng) -> Draft:
        names: list[str] = []
        while len(names) < self.num_chains * (self.num_hops + 1):
            name = "".join(rng.choice(string.ascii_uppercase) for _ in range(5))
            if name not in names and not self.haystack.contains(name):
                names.append(name)
        values: list[str] = []
        while len(values) < self.num_chains:
            value = str(rng.randint(10000, 99999))
            if value not in values and not self.haystack.contains(value):
                values.append(value)
        chains = []
        for c in range(self.num_chains):
            chain = names[c * (self.num_hops + 1) : (c + 1) * (self.num_hops + 1)]
            statements = [f"VAR {chain[0]} = {values[c]}."] + [f"VAR {b} = VAR {a}." for a, b in zip(chain, chain[1:])]
            chains.append((chain, statements))
        # Every chain's statements keep their order (a variable is assigned before it is copied);
        # the chains interleave, so the depths are drawn per statement and sorted per chain.
        placed = []
        total = sum(len(s) for _, s in chains)
        for c, (_, statements) in enumerate(chains):
            if self.depth == "random":
                depths = sorted(rng.random() for _ in statements)
            else:
                depths = [(c + j * self.num_chains + 0.5) / total for j in range(len(statements))]
            placed.extend(zip(depths, statements))
        offset = self.haystack.draw_offset(rng)
        answer = tuple(chains[0][0])
        return Draft(
            identity=values[0] + "=" + "|".join(answer),
            references=answer,
            unique=tuple(s for _, s in placed),
            data={"value": values[0], "placed": placed, "offset": offset},
        )

    def new_tokens(self, draft: Draft) -> int:
        return 8 * len(draft.references) + 8

    def build(self, draft: Draft, size: int, depth: float) -> tuple[str, str, str]:
        hay = self.haystack.view(draft.split)  # prose: only this split's passages
        text = hay.insert(hay.pieces(size, hay.resolve(draft.data["offset"])), draft.data["placed"])
        value = draft.data["value"]
        body = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n" + text + "\n"
        query = f"Question: Find all variables that are assigned the value {value} in the text above."
        prefix = (
            f" Answer: According to the chain(s) of variable assignment in the text above, "
            f"{len(draft.references)} variables are assigned the value {value}, they are:"
        )
        return body, query, prefix
