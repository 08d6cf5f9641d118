"""Workflow memory: the workflow model, its text formats, the versioned store, and retrieval.

Knows nothing of browsers or LLMs; embeddings come in through a small interface.
"""
