"""Is a proposed IR a faithful translation of the source?  Checked against ``SourceFacts``.

Why this exists: the verifier proves the IR, not the file.  An IR that invents a collective,
drops one, cites the wrong line or shrinks the inputs can verify while the source is broken.
So before any verification, the IR must pass these checks, each stated in the source's terms:

* the mesh is the one the user asked for (a mesh of size 1 proves nothing);
* every op cites an existing code line; every collective op cites a line that can perform
  it (``dist.all_reduce`` there, a Megatron mapping or layer, a DTensor plan entry, or a call
  through a table holding that collective) — no invented collectives;
* every distributed call that runs unconditionally on the entry's path has an op of its
  kind citing its line, and no line is cited by more collective ops than it can perform;
* an op with ``handle=`` cites an asynchronous call (``async_op=True``, ``isend``/``irecv``);
* ``rank`` / ``world_size`` / ``wait`` ops cite lines that read the rank / size / wait;
* input names exist in the source; the entry's arguments are inputs with the shapes and
  dtypes of ``example_inputs()`` (or ``--input``), replicated (every rank receives the whole
  tensor); outputs are replicated and as many as the entry returns;
* in ``auto`` mode, the collectives the deterministic frontend translated are kept.

Every failure is a ``Problem`` of kind ``faithfulness`` naming the source line; they go back
to the model.  None of them depends on whether the program verifies.
"""
from __future__ import annotations

import re
from collections import defaultdict

from verifier.ir import Mesh, Op, Program, eval_dim
from verifier.placements import Replicate
from verifier.registry import all_rules

from .problems import FAITHFULNESS, Problem, describe_op
from .source_facts import SourceFacts

P2P_KINDS = frozenset({"send", "recv", "isend", "irecv"})


def collective_kinds() -> frozenset[str]:
    """Ops that communicate: they must be justified by a distributed construct in the source."""
    return frozenset(name for name, rule in all_rules().items() if rule.is_collective) | P2P_KINDS


_LINE_WORDS = {"rank": re.compile(r"rank", re.I), "world_size": re.compile(r"world|size", re.I),
               "wait": re.compile(r"wait", re.I)}
_PARAM_WORDS = {"weight", "bias", "w", "b"}


def check_faithfulness(program: Program, facts: SourceFacts, *, expected_mesh: Mesh | None = None,
                       input_shapes: dict[str, list[int]] | None = None,
                       frontend: Program | None = None) -> list[Problem]:
    """Every way ``program`` misrepresents the source, as problems to send back."""
    problems: list[Problem] = []
    if expected_mesh is not None and program.mesh != expected_mesh:
        problems.append(Problem(FAITHFULNESS, f"the mesh must be `mesh {_mesh_text(expected_mesh)}` (from the "
                                              f"command line, the file or the default), not `mesh "
                                              f"{_mesh_text(program.mesh)}`"))
    problems += _lines(program, facts)
    problems += _claims(program, facts)
    problems += _coverage(program, facts)
    problems += _inputs(program, facts, input_shapes or {})
    problems += _outputs(program, facts)
    if frontend is not None:
        problems += _kept(program, frontend)
    return problems


def every_op(program: Program) -> list[Op]:
    """Forward ops, custom-function bodies and the backward section: all cite source lines."""
    ops = list(program.ops)
    for function in program.functions.values():
        ops.extend(function.ops)
    return ops + list(program.backward_ops)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _mesh_text(mesh: Mesh) -> str:
    return ", ".join(f"{name}={size}" for name, size in mesh.dims)


def _is_code(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith("#")


def _lines(program: Program, facts: SourceFacts) -> list[Problem]:
    problems = []
    for op in every_op(program):
        line = op.span.line
        if line is None:
            problems.append(Problem(FAITHFULNESS, f"`{describe_op(op)}` has no source line; every op carries "
                                                  f"the line it comes from"))
        elif not 1 <= line <= len(facts.lines):
            problems.append(Problem(FAITHFULNESS, f"`{describe_op(op)}` cites line {line}, but the file has "
                                                  f"{len(facts.lines)} lines"))
        elif not _is_code(facts.line_text(line)):
            problems.append(Problem(FAITHFULNESS, f"`{describe_op(op)}` cites line {line}, which is not code",
                                    line))
    return problems


def _claims(program: Program, facts: SourceFacts) -> list[Problem]:
    """No op claims a communication (or rank read, or wait) its line does not perform."""
    problems = []
    collectives = collective_kinds()
    for op in every_op(program):
        line = op.span.line
        if line is None or not 1 <= line <= len(facts.lines):
            continue
        text = facts.line_text(line).strip()
        if op.kind in _LINE_WORDS:
            if not _LINE_WORDS[op.kind].search(text):
                problems.append(Problem(FAITHFULNESS, f"`{describe_op(op)}` cites line {line}, but `{text}` does "
                                                      f"not read the {op.kind.replace('_', ' ')}", line))
            continue
        if op.kind not in collectives:
            continue
        sites = [s for s in facts.sites_at(line) if op.kind in s.kinds]
        if not sites:
            claim = f"{_article(op.kind)} {op.kind}"
            problems.append(Problem(FAITHFULNESS, f"`{describe_op(op)}` claims {claim}, but line {line} (`{text}`) "
                                                  f"has no call that performs one; do not invent collectives — cite "
                                                  f"the line of the call that communicates", line))
            continue
        handle = op.attrs.get("handle")
        direct = [s for s in sites if s.direct and s.line == line]
        if handle is not None and direct and not any(s.is_async for s in direct):
            problems.append(Problem(FAITHFULNESS, f"`{describe_op(op)}` is asynchronous (handle={handle}), but the "
                                                  f"call on line {line} is synchronous (no async_op=True)", line))
    return problems


def _coverage(program: Program, facts: SourceFacts) -> list[Problem]:
    """Every unconditional distributed call has its op; no line performs more than it can."""
    problems = []
    collectives = collective_kinds()
    cited: dict[int, list] = defaultdict(list)
    for op in every_op(program):
        if op.span.line is not None:
            cited[op.span.line].append(op)
    groups: dict[tuple, list] = defaultdict(list)
    for site in facts.sites:
        if site.required:
            groups[(site.lines, site.required)].append(site)
    for (lines, required), sites in groups.items():
        have = sum(1 for line in lines for op in cited.get(line, []) if op.kind in required)
        if have < len(sites):
            site = sites[0]
            kinds = " or ".join(sorted(required))
            problems.append(Problem(FAITHFULNESS, f"`{facts.line_text(site.line).strip()}` runs on every call of "
                                                  f"the entry but no op of kind {kinds} cites line {site.line}; every "
                                                  f"distributed call maps to exactly one op carrying its line",
                                    site.line))
    by_line: dict[int, list] = defaultdict(list)
    for site in facts.sites:
        if site.direct:
            by_line[site.line].append(site)
    for line, sites in by_line.items():
        if any(s.max_ops is None for s in sites):
            continue
        kinds = set().union(*(s.kinds for s in sites)) & collectives
        if not kinds:
            continue
        limit = sum(s.max_ops for s in sites)
        ops = [op for op in cited.get(line, []) if op.kind in kinds]
        if len(ops) > limit:
            problems.append(Problem(FAITHFULNESS, f"line {line} (`{facts.line_text(line).strip()}`) performs "
                                                  f"{limit} {'/'.join(sorted(kinds))} per call of the entry, but "
                                                  f"{len(ops)} ops cite it: "
                                                  + "; ".join(f"`{describe_op(op)}`" for op in ops), line))
    return problems


def _plausible_name(name: str, identifiers: frozenset[str]) -> bool:
    if name in identifiers:
        return True
    parts = [p for p in re.split(r"[._]", name) if p]
    if not parts:
        return False
    if "." in name and name.split(".")[0] in identifiers:
        return True
    return parts[0] in identifiers and all(p in identifiers or p in _PARAM_WORDS for p in parts[1:])


def _inputs(program: Program, facts: SourceFacts, shapes: dict[str, list[int]]) -> list[Problem]:
    problems = []
    declared = {spec.name: spec for spec in program.inputs}
    for spec in program.inputs:
        if facts.identifiers and not _plausible_name(spec.name, facts.identifiers):
            problems.append(Problem(FAITHFULNESS, f"input {spec.name!r} does not name anything in the source; "
                                                  f"use the entry's argument and parameter names", spec.span.line))
    env = {name: value for name, value in program.dims.items() if value is not None}
    for example in facts.example_inputs:
        name = example.param
        if name is None:
            continue
        want = tuple(shapes[name]) if name in shapes else example.shape
        spec = declared.get(name)
        if spec is None:
            size = f" (shape {'x'.join(map(str, want))})" if want else ""
            problems.append(Problem(FAITHFULNESS, f"the entry {facts.entry} receives {name!r}{size} but the IR "
                                                  f"declares no input named {name!r}"))
            continue
        if want is not None:
            try:
                have = tuple(int(eval_dim(d, env)) for d in spec.shape)
            except (KeyError, ValueError, TypeError, ZeroDivisionError):
                have = None
            if have is not None and have != want:
                problems.append(Problem(FAITHFULNESS, f"input {name} has shape {'x'.join(map(str, have))} in the IR "
                                                      f"but {'x'.join(map(str, want))} in example_inputs()",
                                        spec.span.line))
        is_int = spec.dtype.startswith(("i", "u"))
        if example.dtype == "int" and not is_int or example.dtype == "float" and (is_int or spec.dtype == "bool"):
            problems.append(Problem(FAITHFULNESS, f"input {name} is {example.dtype} in example_inputs() but "
                                                  f"{spec.dtype} in the IR", spec.span.line))
        if spec.placements and not all(isinstance(p, Replicate) for p in spec.placements):
            given = ", ".join(f"{m}: {p}" for m, p in zip(program.mesh.names, spec.placements))
            problems.append(Problem(FAITHFULNESS, f"input {name} is an argument of the entry, so every rank receives "
                                                  f"the whole tensor: its placement is R on every mesh dim, not "
                                                  f"{{{given}}}; model the code's own slicing with ops",
                                    spec.span.line))
    return problems


def _outputs(program: Program, facts: SourceFacts) -> list[Problem]:
    problems = []
    for out in program.outputs:
        if out.placements and not all(isinstance(p, Replicate) for p in out.placements):
            problems.append(Problem(FAITHFULNESS, f"output {out.name}: every rank returns the global value, so the "
                                                  f"expected placement is R on every mesh dim", out.span.line))
    if facts.returns is not None and len(program.outputs) != facts.returns:
        problems.append(Problem(FAITHFULNESS, f"the entry returns {facts.returns} value(s) but the IR declares "
                                              f"{len(program.outputs)} output(s)"))
    return problems


def _kept(program: Program, frontend: Program) -> list[Problem]:
    collectives = collective_kinds()
    have = {(op.kind, op.span.line) for op in every_op(program)}
    return [Problem(FAITHFULNESS, f"the deterministic frontend translated line {op.span.line} as "
                                  f"`{describe_op(op)}`; keep an op {op.kind} at that line", op.span.line)
            for op in every_op(frontend) if op.kind in collectives and (op.kind, op.span.line) not in have]
