"""awm: Agent Workflow Memory for web agents.

Solve benchmark tasks with a hardened web agent, judge each trajectory, induce reusable workflows
from the good ones, keep them as versioned memory, and measure whether that memory helps.
"""

__version__ = "0.1.0"
