"""The LLM translation loop: ask, read, check faithfulness, verify, triage — in bounded rounds.

Feedback policy (what may go back to the model as "fix your IR"):

1. parse errors in its answer (JSON schema violations, ``.vir`` syntax), with the place;
2. structural errors of the IR: SSA, unknown ops, arity, missing attributes, unknown mesh
   dims — facts about the IR alone;
3. faithfulness errors: the IR misrepresents the source — a distributed call without its op,
   an op citing a line that does not do what it claims, invented tensor names, input shapes
   that disagree with ``example_inputs()``, a different mesh (``agent/faithfulness.py``);
4. shape errors, only after running the source showed that the source itself runs;
5. execution evidence: the source, run on the same inputs, agrees with its own 1-rank run
   but not with the IR — so the IR, not the source, is wrong.

Never sent back: a verification finding on a faithful IR (a placement error, a counterexample
to equivalence, a temporal error).  Such a finding reflects the *source*; it is reported to
the user — marked "confirmed by execution" when running the source on 1 and N ranks
reproduces it, "unconfirmed" when torch is not installed or the harness cannot run the file.
The model is never told that the program failed to verify, so it cannot "repair" a real bug
(add the missing all-reduce) and launder it into a pass.  Conversely, when an LLM IR verifies
but the source's own N-rank and 1-rank numbers differ, the bug is real: it is reported, and
the model is asked for a faithful IR that shows where it is.

Bounds: ``max_rounds`` answers, a token budget, and the client's retry deadline.  A model that
never produces a faithful IR ends with verdict ``unsupported`` and the remaining problems.
An IR that execution showed to contradict the source is never handed out in the outcome's
``translation`` (its program is None), so no later re-check can turn it into a verdict.
Every op of the result records its provenance: ``frontend`` or ``llm round N`` (the round in
which the model first proposed it).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import prompts
from frontends.base import Translation, Unsupported
from verifier.check import check_program
from verifier.ir import Mesh, Op, Program
from verifier.report import ERROR, NOTE, VERIFIED, VIOLATIONS, Diagnostic, Report
from verifier.text_format import print_program
from verifier.wellformed import check_structure

from . import execute
from .answer import parse_answer
from .cache import CachedAnswer, CacheKey, ResponseCache, sha256
from .client import ChatClient, Completion, LLMError, StructuredOutputUnsupported
from .faithfulness import check_faithfulness
from .feedback import feedback_message
from .ir_json import ir_schema
from .problems import PARSE, STRUCTURE, Problem
from .prompting import JSON, VIR, Task, initial_messages, system_prompt
from .regions import HINT, needs_llm_diagnostics, needs_llm_message
from .settings import LLMSettings
from .source_facts import SourceFacts, read_source
from .triage import (CONFIRMED, IR_WRONG, UNCONFIRMED, Finding, Runner, cross_check, triage_counterexample,
                     triage_shape_error)

Progress = Callable[[str], None]
DEFAULT_MESH = Mesh((("tp", 2),))
VALUE_CHECKS = ("equivalence", "placement")  # findings about computed values: execution can confirm them


@dataclass
class LLMOutcome:
    """The final translation, its verification report, and what the LLM path cost."""

    translation: Translation  # program + per-op provenance ("frontend" / "llm round N")
    report: Report  # final: print it as is (do not re-check the program)
    diagnostics: list[Diagnostic] = field(default_factory=list)  # the agent's own, also inside `report`
    rounds: int = 0  # answers read (cached ones included)
    tokens_in: int = 0  # spent in this run (cached answers cost nothing)
    tokens_out: int = 0
    cached_rounds: int = 0
    model: str | None = None
    used_llm: bool = False

    @property
    def verdict(self) -> str:
        return self.report.verdict

    @property
    def note(self) -> str:
        """One line for a report or a log: what the LLM path did and what it cost."""
        if not self.used_llm:
            return "no LLM was used"
        cost = (f"{self.tokens_in} tokens in, {self.tokens_out} out" if self.tokens_in or self.tokens_out
                else "no tokens spent")
        cached = f", {self.cached_rounds} from the cache" if self.cached_rounds else ""
        return (f"LLM translation ({self.model or 'unknown model'}): {self.verdict} after {self.rounds} round(s)"
                f"{cached}; {cost}")

    @property
    def ir_text(self) -> str | None:
        program = self.translation.program
        return print_program(program) if program is not None else None


def llm_translate(source: str, path: str, base: Translation | None, settings: LLMSettings,
                  progress: Progress | None = None, *, entry: str | None = None,
                  mesh: Mesh | dict[str, int] | None = None,
                  input_shapes: dict[str, list[int]] | None = None) -> LLMOutcome:
    """Translate ``source`` (what ``base`` could not, or all of it) and verify the result.

    ``base`` is the deterministic frontend's ``Translation`` (None if it produced nothing).
    ``mesh`` / ``input_shapes`` are the user's ``--mesh`` / ``--input``; ``entry`` their
    ``--entry``.  Raises ``LLMError`` (one line) when the endpoint cannot be used.
    """
    say = progress or (lambda message: None)
    facts = read_source(source, path, entry or (base.entry if base else None))
    expected = _expected_mesh(mesh, base, facts)
    needs_llm = settings.mode == "full" or base is None or not base.complete
    if settings.mode == "off" or not needs_llm:
        return _without_llm(base, path, facts, expected, "--llm off" if settings.mode == "off" else None)
    if facts.syntax_error:
        report = Report(path, dict(expected.dims))
        report.add(Diagnostic("unsupported", ERROR, f"the file does not parse ({facts.syntax_error})"))
        return LLMOutcome(_translation(base, facts, None, []), report, list(report.diagnostics))
    return _Session(source, path, base, settings, say, facts, expected, input_shapes).run()


def _expected_mesh(mesh: Mesh | dict[str, int] | None, base: Translation | None, facts: SourceFacts) -> Mesh:
    if isinstance(mesh, Mesh):
        return mesh
    if mesh:
        return Mesh(tuple(mesh.items()))
    if base is not None and base.program is not None:
        return base.program.mesh
    return Mesh(facts.mesh) if facts.mesh else DEFAULT_MESH


def _translation(base: Translation | None, facts: SourceFacts, program: Program | None, provenance: list[str],
                 unsupported: list[Unsupported] | None = None) -> Translation:
    style = base.style if base is not None else facts.style
    entry = (base.entry if base is not None else None) or facts.entry or "?"
    return Translation(program, style, entry, list(unsupported or []), provenance)


def _without_llm(base: Translation | None, path: str, facts: SourceFacts, mesh: Mesh, why: str | None) -> LLMOutcome:
    """No LLM: verify a complete frontend translation, or explain which regions needed one."""
    if base is not None and base.complete:
        report = check_program(base.program, path)
        provenance = base.provenance or ["frontend"] * len(base.program.ops)
        return LLMOutcome(_translation(base, facts, base.program, provenance), report)
    unsupported = list(base.unsupported) if base is not None else []
    if not unsupported:
        unsupported = [Unsupported(None, facts.entry or "file", "the deterministic frontend produced no IR")]
    hint = "run with --llm auto or --llm full to let an LLM translate them" if why else HINT
    report = Report(path, dict(mesh.dims))
    diagnostics = needs_llm_diagnostics(unsupported, hint)
    for diagnostic in diagnostics:
        report.add(diagnostic)
    report.extra["needs_llm"] = needs_llm_message(unsupported)
    program = base.program if base is not None else None
    return LLMOutcome(_translation(base, facts, program, list(base.provenance) if base else [], unsupported), report,
                      diagnostics)


def _signature(op: Op) -> tuple:
    return (op.kind, op.span.line, len(op.args), json.dumps(op.attrs, sort_keys=True, default=str))


@dataclass
class _Step:
    """What one round decided: send ``problems`` back, or stop with ``report``."""

    problems: list[Problem] = field(default_factory=list)
    report: Report | None = None
    rejected: str | None = None  # why the last IR must not be used (it contradicts the source)


class _Session:
    def __init__(self, source: str, path: str, base: Translation | None, settings: LLMSettings, say: Progress,
                 facts: SourceFacts, mesh: Mesh, input_shapes: dict[str, list[int]] | None):
        self.source, self.path, self.base, self.settings, self.say = source, path, base, settings, say
        self.facts, self.mesh, self.input_shapes = facts, mesh, input_shapes
        self.cache = ResponseCache.for_source(path, settings.cache_dir)
        self.runner = Runner(source, path, facts.entry, settings.execution_timeout, settings.execute)
        self.format = JSON if settings.structured else VIR
        self.task = Task(source, path, facts, settings.mode if base is not None else "full", mesh, base, input_shapes)
        self.messages = initial_messages(self.task, self.format)
        self.feedback: list[str] = []
        self.model = settings.model
        self.client: ChatClient | None = None
        self.first_seen: dict[tuple, int] = {}
        self.tokens_in = self.tokens_out = self.cached_rounds = self.rounds = 0
        self.confirmed: Diagnostic | None = None  # execution showed the source itself is wrong
        self.notes: list[Diagnostic] = []
        self.last_program: Program | None = None  # the last answer that parsed
        self.accepted: Program | None = None  # the last answer that passed faithfulness
        if settings.execute:
            execute.warm_up()

    # -- asking ------------------------------------------------------------------------------
    def _key(self, round_number: int) -> CacheKey:
        return CacheKey(sha256(self.source), prompts.PROMPT_VERSION, self.model, self.task.mode, round_number,
                        sha256("\n\n".join(self.feedback)))

    def _ask(self, round_number: int) -> tuple[Completion | None, bool]:
        """The model's answer for this round and whether it came from the cache."""
        key = self._key(round_number)
        if not self.settings.no_cache:
            cached = self.cache.get(key)
            if cached is not None:
                self.model = cached.model
                self.cached_rounds += 1
                return Completion(cached.text, cached.tokens_in, cached.tokens_out, cached.response_format), True
        if not self.settings.has_endpoint:
            return None, False
        if self.client is None:
            self.client = ChatClient(self.settings)
        try:
            completion = self.client.complete(self.messages, ir_schema() if self.format == JSON else None)
        except StructuredOutputUnsupported:
            self.say("llm: the endpoint has no structured output; asking for .vir text instead")
            self.format = VIR
            self.messages[0] = {"role": "system", "content": system_prompt(VIR)}
            completion = self.client.complete(self.messages, None)
        self.tokens_in += completion.tokens_in
        self.tokens_out += completion.tokens_out
        if not self.settings.no_cache:
            self.cache.put(key, CachedAnswer(completion.text, self.settings.model or "", completion.tokens_in,
                                             completion.tokens_out, completion.response_format))
        return completion, False

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> LLMOutcome:
        max_rounds = self.settings.max_rounds
        problems: list[Problem] = []
        for round_number in range(1, max_rounds + 1):
            if self.tokens_in + self.tokens_out >= self.settings.token_budget:
                return self._give_up(problems, f"the token budget ({self.settings.token_budget}) is spent")
            completion, cached = self._ask(round_number)
            if completion is None:
                return self._no_answer(round_number, problems)
            self.rounds = round_number
            cost = ("answer from the cache (0 tokens spent)" if cached
                    else f"{completion.tokens_in} tokens in, {completion.tokens_out} out")
            self.say(f"llm round {round_number}/{max_rounds}: {cost}")
            step = self._round(completion, round_number)
            if step.report is not None:
                return self._finish(step.report, round_number, step.rejected)
            problems = step.problems
            if round_number < max_rounds:
                text = feedback_message(problems, self.facts)
                self.say(f"llm round {round_number}: {len(problems)} problem(s) sent back — {problems[0]}")
                self.messages += [{"role": "assistant", "content": completion.text},
                                  {"role": "user", "content": text}]
                self.feedback.append(text)
        return self._give_up(problems, f"after {max_rounds} round(s) the LLM's IR was still not a faithful "
                                       f"translation")

    def _round(self, completion: Completion, round_number: int) -> _Step:
        if completion.truncated:
            return _Step([Problem(PARSE, f"the answer was cut off at {self.settings.max_tokens} tokens; answer "
                                           f"more compactly (short value names, no comments)")])
        parsed = parse_answer(completion.text, self.path)
        if isinstance(parsed, list):
            return _Step(parsed)
        program = parsed
        self.last_program = program
        for op in program.ops:
            self.first_seen.setdefault(_signature(op), round_number)
        problems = [Problem(STRUCTURE, d.message, d.line) for d in check_structure(program)]
        problems += check_faithfulness(program, self.facts, expected_mesh=self.mesh, input_shapes=self.input_shapes,
                                       frontend=self.base.program if self.base is not None and
                                       self.task.mode == "auto" else None)
        if problems:
            return _Step(problems)
        self.say(f"llm round {round_number}: IR is faithful to the source; verifying")
        return self._verify(program, round_number)

    def _verify(self, program: Program, round_number: int) -> _Step:
        report = check_program(program, self.path)
        self.accepted = program
        shape_errors = [d for d in report.diagnostics if d.check == "well-formed" and d.severity == ERROR]
        last = round_number >= self.settings.max_rounds
        if shape_errors:
            self.say("execution: the IR does not type-check; running the source to see whether it does")
            finding = triage_shape_error(program, self.runner, [(d.message, d.line) for d in shape_errors])
            if finding.status == IR_WRONG and not last:
                return _Step([finding.problem])
            if finding.status == IR_WRONG:
                why = "the LLM's IR still had shape errors the source does not have"
                return _Step(report=self._unsupported_report(program, [finding.problem], why), rejected=why)
            _annotate(shape_errors[0], finding)
            return _Step(report=report)
        if report.verdict == VIOLATIONS:
            errors = [d for d in report.diagnostics if d.severity == ERROR and d.check != "unsupported"]
            if errors[0].check not in VALUE_CHECKS:  # temporal findings: execution cannot settle them
                _annotate(errors[0], Finding(UNCONFIRMED, "found on an IR proposed by an LLM; not confirmed by "
                                                          "execution"))
                return _Step(report=report)
            self.say("execution: the verifier found a counterexample; running the source on it")
            finding = triage_counterexample(program, self.facts, self.runner, self.input_shapes)
            if finding.status == IR_WRONG and not last:
                return _Step([finding.problem])
            if finding.status == IR_WRONG:
                why = "the LLM's IR still disagreed with the source's real numbers"
                return _Step(report=self._unsupported_report(program, [finding.problem], why), rejected=why)
            _annotate(errors[0], finding)
            self.confirmed = None  # this report locates the bug itself
            return _Step(report=report)
        if report.verdict == VERIFIED:
            self.say("execution: cross-checking the verified IR against the source")
            finding = cross_check(program, self.facts, self.runner, self.input_shapes)
            if finding.status == CONFIRMED:
                self.confirmed = Diagnostic(
                    "equivalence", ERROR, f"the source computes something else on "
                                          f"{program.mesh.world} ranks than on 1 rank — {finding.note}; the LLM's IR "
                                          f"did not show where", None,
                    hint="the IR the LLM proposed is not faithful here; treat its proof as void")
                if not last:
                    return _Step([finding.problem])
                report.add(self.confirmed)
                return _Step(report=report, rejected="the LLM's IR verified although running the source shows "
                                                     "a real difference between 1 and N ranks")
            if finding.status == IR_WRONG:
                if not last:
                    return _Step([finding.problem])
                why = "the LLM's IR verified but disagreed with the source's real numbers"
                return _Step(report=self._unsupported_report(program, [finding.problem], why), rejected=why)
            if finding.status == UNCONFIRMED:
                # A proof about an IR nobody checked against the source proves nothing about
                # the source: never exit 0 on it.
                report.add(Diagnostic("unsupported", ERROR, f"unconfirmed: the IR was written by an LLM and the "
                                                            f"proof rests on it; {finding.note}",
                                      hint="install torch (the tracing frontend and the execution cross-check run "
                                           "the source) or make the file importable"))
                return _Step(report=report)
            self.notes.append(Diagnostic("llm", NOTE, finding.note))
        return _Step(report=report)

    # -- endings -----------------------------------------------------------------------------
    def _provenance(self, program: Program) -> list[str]:
        frontend = set()
        if self.base is not None and self.base.program is not None:
            frontend = {_signature(op) for op in self.base.program.ops}
        return ["frontend" if _signature(op) in frontend else f"llm round {self.first_seen.get(_signature(op), 1)}"
                for op in program.ops]

    def _summary(self) -> dict:
        return {"mode": self.task.mode, "model": self.model, "rounds": self.rounds, "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out, "cached_rounds": self.cached_rounds,
                "prompt_version": prompts.PROMPT_VERSION, "response_format": self.format}

    def _outcome(self, translation: Translation, report: Report, own: list[Diagnostic]) -> LLMOutcome:
        if translation.program is not None and translation.provenance:
            counts: dict[str, int] = {}
            for origin in translation.provenance:
                counts[origin] = counts.get(origin, 0) + 1
            report.extra["llm"] = {**self._summary(), "provenance": counts}
        else:
            report.extra["llm"] = self._summary()
        return LLMOutcome(translation, report, own, self.rounds, self.tokens_in, self.tokens_out, self.cached_rounds,
                          self.model, True)

    def _finish(self, report: Report, round_number: int, rejected: str | None = None) -> LLMOutcome:
        """The final outcome.  A rejected IR is not handed out: whoever re-checks the
        translation must not verify an IR that contradicts the source."""
        program = self.accepted or self.last_program
        if self.confirmed is not None and not rejected:
            rejected = ("running the source shows a real difference between 1 and N ranks that the LLM's IR "
                        "does not show")
        own = list(self.notes)
        if self.confirmed is not None and self.confirmed not in report.diagnostics:
            own.append(self.confirmed)
        for diagnostic in own:
            if diagnostic not in report.diagnostics:
                report.add(diagnostic)
        if rejected:
            unsupported = (list(self.base.unsupported) if self.base is not None else []) + [
                Unsupported(None, "LLM translation", rejected)]
            translation = _translation(self.base, self.facts, None, [], unsupported)
        else:
            translation = _translation(self.base, self.facts, program, self._provenance(program))
        self.say(f"llm: {report.verdict} after {round_number} round(s)")
        return self._outcome(translation, report, own)

    def _unsupported_report(self, program: Program, problems: list[Problem], why: str) -> Report:
        report = Report(self.path, dict(self.mesh.dims), ops=len(program.ops))
        for diagnostic in self._problem_diagnostics(problems, why):
            report.add(diagnostic)
        return report

    def _problem_diagnostics(self, problems: list[Problem], why: str) -> list[Diagnostic]:
        first = problems[0] if problems else None
        head = Diagnostic("unsupported", ERROR, f"{why}" + (f"; first remaining problem: {first}" if first else ""),
                          first.source_line if first else None,
                          hint="try another model, more --max-rounds, or --llm off to see what the frontend reads")
        return [head] + [Diagnostic("llm", NOTE, str(p), p.source_line) for p in problems[:10]]

    def _give_up(self, problems: list[Problem], why: str) -> LLMOutcome:
        report = Report(self.path, dict(self.mesh.dims))
        own = self._problem_diagnostics(problems, why)
        if self.confirmed is not None:
            own.insert(0, self.confirmed)
        for diagnostic in own:
            report.add(diagnostic)
        unsupported = list(self.base.unsupported) if self.base is not None else []
        base_program = self.base.program if self.base is not None else None
        provenance = list(self.base.provenance) if self.base is not None else []
        self.say(f"llm: {report.verdict} — {why}")
        return self._outcome(_translation(self.base, self.facts, base_program, provenance, unsupported), report, own)

    def _no_answer(self, round_number: int, problems: list[Problem]) -> LLMOutcome:
        """No endpoint and no cached answer: an error for --llm full, the list of regions for auto."""
        if round_number == 1 and self.settings.mode == "full":
            raise LLMError("--llm full needs an LLM endpoint: pass --base-url or set OPENAI_BASE_URL "
                           "(no cached answer for this file)")
        if round_number == 1:
            return _without_llm(self.base, self.path, self.facts, self.mesh, None)
        return self._give_up(problems, f"round {round_number} needs an LLM endpoint (no cached answer for it)")


def _annotate(diagnostic: Diagnostic, finding: Finding) -> None:
    """Mark a verification finding on LLM IR as confirmed (or not) by running the source."""
    diagnostic.message += f" — {finding.note}"
    if diagnostic.counterexample is not None:
        diagnostic.counterexample.note = (diagnostic.counterexample.note + "; " if diagnostic.counterexample.note
                                          else "") + finding.note
