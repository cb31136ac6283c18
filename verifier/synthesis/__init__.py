"""Repair synthesis: verified fixes for communication bugs, ranked by communication cost."""
from .cost import CostModel
from .search import Budget, IRFix, SynthesisResult, synthesize

__all__ = ["Budget", "CostModel", "IRFix", "SynthesisResult", "synthesize"]
