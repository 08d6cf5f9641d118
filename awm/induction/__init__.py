"""Workflow induction: admit good trajectories, turn them into workflows (rule-based or by an LLM),
merge them into a memory scope without duplicates, and commit a new version.

Modules: `abstraction` (a trajectory's id-free shape), `rule` and `neural` (the two inducers, pure:
trajectories in, candidate workflows out; which trajectories may teach is `awm.evaluation.admission`), `merge`
(duplicates strengthen, not copy), `commit` (the one commit path every writer of memory uses),
`offline` (loads stored trajectories, admits, induces, commits), `commands` (`awm induce`).
"""

from awm.evaluation.admission import admit, review_workflows
from awm.induction.commit import CommitResult, commit_candidates, find_commit
from awm.induction.merge import MergeReport, merge_workflows
from awm.induction.neural import InductionError, induce_neural
from awm.induction.offline import InductionResult, induce_into_store, load_inputs
from awm.induction.rule import induce_rule

__all__ = [
    "CommitResult",
    "InductionError",
    "InductionResult",
    "MergeReport",
    "admit",
    "commit_candidates",
    "find_commit",
    "induce_into_store",
    "induce_neural",
    "induce_rule",
    "load_inputs",
    "merge_workflows",
    "review_workflows",
]
