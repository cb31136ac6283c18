"""Source-level repair and review: the application layer on top of ``verifier.synthesis``.

``verifier.synthesis`` repairs IR programs; this package re-spells those repairs in the
user's source (through ``frontends.patches``), translates and verifies the patched file,
and serves ``verify-agent fix`` and ``verify-agent review``.
"""
from .fixes import SourceFix, source_fixes, suggest_fixes

__all__ = ["SourceFix", "source_fixes", "suggest_fixes"]
