"""Repair synthesis: verified fixes for communication bugs, ranked by communication cost.

``synthesize`` repairs an IR program (beam search over the edits the pattern table in
``patterns.py`` proposes, screened cheaply, verified with ``check_program``).  Turning those
repairs into source patches is the application's job (``verify_agent.repair``).
"""
from .cost import CostModel
from .search import Budget, IRFix, SynthesisResult, synthesize

__all__ = ["Budget", "CostModel", "IRFix", "SynthesisResult", "synthesize"]
