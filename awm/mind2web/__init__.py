"""Mind2Web, offline: native records, candidate ranking and pruning, prompts, AWM's metrics and scoring."""
