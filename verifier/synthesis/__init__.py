"""Repair synthesis: verified fixes for communication bugs, ranked by communication cost.

``synthesize`` repairs an IR program (beam search over the edits the pattern table in
``patterns.py`` proposes, screened cheaply, verified with ``check_program``);
``suggest_fixes`` turns those repairs into source patches that verify after re-translation.
"""
from .cost import CostModel
from .fixes import SourceFix, source_fixes, suggest_fixes
from .search import Budget, IRFix, SynthesisResult, synthesize

__all__ = ["Budget", "CostModel", "IRFix", "SynthesisResult", "SourceFix", "synthesize", "suggest_fixes",
           "source_fixes"]
