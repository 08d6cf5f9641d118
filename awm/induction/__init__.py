"""Workflow induction: admit good trajectories, turn them into workflows (rule-based or by an LLM),
merge them into a memory scope without duplicates, and commit a new version.

Modules: `abstraction` (a trajectory's id-free shape), `rule` and `neural` (the two inducers),
`admission` (which trajectories may teach), `merge` (duplicates strengthen, not copy), `offline`
(the driver that loads, admits, induces and commits), `commands` (`awm induce`).
"""

from awm.induction.admission import admit, review_workflows
from awm.induction.merge import MergeReport, merge_workflows
from awm.induction.neural import InductionError, induce_neural
from awm.induction.offline import InductionResult, induce_into_store, load_inputs
from awm.induction.rule import induce_rule

__all__ = [
    "InductionError",
    "InductionResult",
    "MergeReport",
    "admit",
    "induce_into_store",
    "induce_neural",
    "induce_rule",
    "load_inputs",
    "merge_workflows",
    "review_workflows",
]
