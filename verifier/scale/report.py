"""What a plan check reports: the verdict, the cost, and findings located in the plan.

A finding names where it is in the training step, not only a line: the block
(``layers.97.mlp``), its layer and pipeline stage, and the ranks that run the faulty code
(``pp=12, dp=63, tp=0..7``: global ranks 6648-6655), plus the line of the op in the
block's IR (``print_program`` of the class shows it in context).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..report import UNSUPPORTED, VERIFIED, VIOLATIONS


@dataclass
class Finding:
    check: str
    message: str
    block: str = ""                 # "layers.97.mlp", "pipeline schedule", ...
    layer: int | None = None
    stage: int | None = None        # pipeline (pp) rank
    ranks: str = ""                 # which ranks run the faulty code
    line: int | None = None
    op: str = ""                    # the op at ``line`` in the block's IR
    instances: int = 1              # how many blocks share this class (and so this finding)
    severity: str = "error"
    phase: str = ""                 # "forward", "backward" (or gradient sync), "schedule"
    details: list[str] = field(default_factory=list)  # further diagnostics of the same class

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "severity": self.severity, "block": self.block, "layer": self.layer,
                "stage": self.stage, "ranks": self.ranks, "line": self.line, "op": self.op, "phase": self.phase,
                "instances": self.instances, "message": self.message, "details": self.details}

    def __str__(self) -> str:
        where = [self.block or "?"]
        if self.layer is not None:
            where.append(f"layer {self.layer}")
        if self.stage is not None:
            where.append(f"pipeline stage {self.stage}")
        if self.ranks:
            where.append(self.ranks)
        at = f" line {self.line}: {self.op}" if self.line is not None and self.op else ""
        phase = f" ({self.phase})" if self.phase else ""
        return f"[{self.check}]{phase} {', '.join(where)}{at}: {self.message}"


@dataclass
class ScaleReport:
    plan: str
    ops: int = 0
    ranks: int = 0
    seconds: float = 0.0
    peak_mib: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    proven: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        if any(f.severity == "error" and f.check != "unsupported" for f in self.findings):
            return VIOLATIONS
        if self.unsupported or any(f.check == "unsupported" for f in self.findings) or not self.proven:
            return UNSUPPORTED
        return VERIFIED

    def to_json(self) -> dict[str, Any]:
        return {"plan": self.plan, "ops": self.ops, "ranks": self.ranks, "seconds": round(self.seconds, 2),
                "peak_mib": round(self.peak_mib, 1), "verdict": self.verdict,
                "findings": [f.to_json() for f in self.findings], "proven": self.proven, "stats": self.stats}
