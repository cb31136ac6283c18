"""``verify-agent review --base REF``: pull-request review comments with verified suggestions.

Checks the Python files changed since ``REF`` and returns
* the JSON body of GitHub's "create a review" REST call (``POST /repos/{owner}/{repo}/pulls/
  {number}/reviews``): ``{"body", "event": "COMMENT", "comments": [{"path", "line",
  "side": "RIGHT", "body"}]}``, where a fixable violation carries a ```` ```suggestion ````
  block holding the verified patch for those lines (multi-line ones add ``start_line``);
* SARIF 2.1.0 of the same findings, with each verified patch as a SARIF ``fix``.

GitHub only accepts comments on lines of the pull request's diff; a finding elsewhere is
listed in the review body instead.  Run as ``python -m verify_agent.repair.review``.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from verifier.report import ERROR, Report
from .commands import UsageError, check_file, fixes_for
from .fixes import SourceFix

Progress = Optional[Callable[[str], None]]
MARK = "**verify-agent**"


@dataclass(frozen=True)
class Block:
    """Replace lines ``start..end`` (1-based, inclusive) of the original file by ``text``."""

    start: int
    end: int
    text: str


def suggestion_blocks(original: str, patched: str, merge_gap: int = 2) -> list[Block]:
    """The patch as whole-line replacements; a pure insertion is anchored on the line above it."""
    old, new = original.splitlines(keepends=True), patched.splitlines(keepends=True)
    groups: list[list[tuple[str, int, int, int, int]]] = []
    for opcode in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if opcode[0] == "equal":
            continue
        if groups and opcode[1] - groups[-1][-1][2] <= merge_gap:
            groups[-1].append(opcode)
        else:
            groups.append([opcode])
    blocks = []
    for group in groups:
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        if i1 == i2:  # insertion only: take the line above (or below, at the top) along
            if i1 > 0:
                i1, j1 = i1 - 1, j1 - 1
            else:
                i2, j2 = i2 + 1, j2 + 1
        blocks.append(Block(i1 + 1, i2, "".join(new[j1:j2])))
    return blocks


def _git_bytes(repo_dir: str | Path, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(repo_dir), "-c", "core.quotePath=false", *args],
                              capture_output=True, stdin=subprocess.DEVNULL)
    except OSError as error:
        raise UsageError(f"cannot run git: {error}") from None
    if done.returncode != 0:
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise UsageError(f"git {' '.join(args[:2])} failed in {repo_dir}: {last[0] if last else 'no message'}")
    return done.stdout


def _git(repo_dir: str | Path, *args: str) -> str:
    return _git_bytes(repo_dir, *args).decode("utf-8", "replace")


def _checked_ref(base_ref: str) -> str:
    """A ref is never read as an option (``--output=...`` would make git write a file)."""
    if not base_ref or base_ref.startswith("-") or "\0" in base_ref:
        raise UsageError(f"--base {base_ref!r}: expected a git ref such as origin/main")
    return base_ref


def changed_files(base_ref: str, repo_dir: str | Path) -> list[str]:
    """Python files added, modified, renamed or copied since ``base_ref`` (new names).

    ``git diff -z`` separates records with NUL and never quotes names, so every path works:
    spaces, newlines, non-ASCII, renames (the new name is checked); deleted files have
    nothing left to check.
    """
    out = _git_bytes(repo_dir, "diff", "-z", "--name-status", "-M", "--diff-filter=AMRC",
                     _checked_ref(base_ref), "--", "*.py")
    fields = out.split(b"\0")
    names, index = [], 0
    while index < len(fields) and fields[index]:
        status = fields[index].decode("ascii", "replace")
        paths = 2 if status[:1] in ("R", "C") else 1
        record = fields[index + 1: index + 1 + paths]
        index += 1 + paths
        if len(record) == paths:
            names.append(os.fsdecode(record[-1]))
    return names


def changed_lines(base_ref: str, repo_dir: str | Path, file: str) -> set[int]:
    """Lines of the new version that the pull request's diff shows (added or context)."""
    out = _git(repo_dir, "diff", "-M", "--unified=3", _checked_ref(base_ref), "--", file)
    lines: set[int] = set()
    for header in out.splitlines():
        if header.startswith("@@"):
            new = header.split("+", 1)[1].split(" ", 1)[0]
            start, _, count = new.partition(",")
            lines |= set(range(int(start), int(start) + (int(count) if count else 1)))
    return lines


@dataclass
class FileResult:
    path: str
    report: Report
    fixes: list[SourceFix]
    source: str
    why: str = "changed"    # or "calls <changed file>"


def _comment(path: str, block_start: int, block_end: int, body: str) -> dict[str, Any]:
    comment: dict[str, Any] = {"path": path, "line": block_end, "side": "RIGHT", "body": body}
    if block_start < block_end:
        comment.update(start_line=block_start, start_side="RIGHT")
    return comment


def _diagnostic_text(report: Report, line: int | None) -> list[str]:
    return [f"{d.message}" + (f" (hint: {d.hint})" if d.hint else "") for d in report.diagnostics
            if d.severity == ERROR and d.line == line]


def confirmation_of(fix: SourceFix) -> str:
    """How real ranks judged a fix: "confirmed", "not confirmed" (the code ran, the real-rank run did
    not agree or did not run) or "not run" (read statically: nothing of the user's was run)."""
    said = fix.report.extra.get("fix_confirmation") if fix.report is not None else None
    if said is None:
        return "not run"
    return "confirmed" if said.startswith("confirmed") else "not confirmed"


def suggestable(fix: SourceFix) -> bool:
    """A suggestion block is posted for a fix real ranks confirmed, or one from the static reading
    (``--no-exec``: no code of the user's runs, so the proof is all there is)."""
    return confirmation_of(fix) != "not confirmed"


def review_comments(results: list[FileResult], allowed: dict[str, set[int] | None]
                    ) -> tuple[list[dict[str, Any]], list[str]]:
    """Comments on diff lines, and the findings that must go to the review body instead."""
    comments, elsewhere = [], []
    for result in results:
        covered: set[int] = set()
        lines_ok = allowed.get(result.path)
        if result.fixes and not suggestable(result.fixes[0]):
            elsewhere.append(f"`{result.path}`: a fix verified but not confirmed on real ranks, not suggested: "
                             f"{result.fixes[0].description}")
        elif result.fixes:
            fix = result.fixes[0]
            for block in suggestion_blocks(result.source, fix.patched):
                span = set(range(block.start, block.end + 1))
                findings = [text for line in sorted(span) for text in _diagnostic_text(result.report, line)]
                body = (f"{MARK}: {'; '.join(findings) or 'part of the fix for the violation(s) in this file'}\n\n"
                        f"Verified fix ({fix.description}; communication cost {fix.comm_cost:.3g} µs/step — the "
                        f"patched file translates and is proven equivalent to its single-device version):\n\n"
                        f"```suggestion\n{block.text}```")
                if lines_ok is None or span <= lines_ok:
                    comments.append(_comment(result.path, block.start, block.end, body))
                    covered |= span
                else:
                    elsewhere.append(f"`{result.path}` lines {block.start}-{block.end}: {fix.description}")
        for diagnostic in result.report.diagnostics:
            if diagnostic.severity != ERROR or diagnostic.line in covered:
                continue
            text = f"{MARK} [{diagnostic.check}]: {diagnostic.message}" + (
                f"\n\nHint: {diagnostic.hint}" if diagnostic.hint else "")
            if diagnostic.line is not None and (lines_ok is None or diagnostic.line in lines_ok):
                comments.append(_comment(result.path, diagnostic.line, diagnostic.line, text))
                covered.add(diagnostic.line)
            else:
                where = f"line {diagnostic.line}" if diagnostic.line else "file"
                elsewhere.append(f"`{result.path}` {where}: [{diagnostic.check}] {diagnostic.message}")
    return comments, elsewhere


def review_body(results: list[FileResult], skipped: list[str], elsewhere: list[str]) -> str:
    lines = [f"{MARK} checked {len(results)} changed file(s) with distributed code.", ""]
    if results:
        lines += ["| file | verdict | violations | verified fixes | fix on real ranks | checked because |",
                  "|---|---|---|---|---|---|"]
        for result in results:
            errors = sum(1 for d in result.report.diagnostics if d.severity == ERROR and d.check != "unsupported")
            ranks = confirmation_of(result.fixes[0]) if result.fixes else "-"
            lines.append(f"| `{result.path}` | {result.report.verdict} | {errors} | {len(result.fixes)} | {ranks} | "
                         f"{result.why} |")
    if elsewhere:
        lines += ["", "Findings outside the lines of this diff:", ""] + [f"- {item}" for item in elsewhere]
    if skipped:
        lines += ["", "Not checked: " + "; ".join(skipped)]
    return "\n".join(lines)


def sarif_with_fixes(results: list[FileResult]) -> str:
    """SARIF 2.1.0 of the reports, each file's best verified patch attached as a SARIF fix."""
    from ..render import render_sarif

    sarif = json.loads(render_sarif([r.report for r in results]))
    by_file = {r.path: r for r in results}
    for item in sarif["runs"][0]["results"]:
        uri = item.get("locations", [{}])[0].get("physicalLocation", {}).get("artifactLocation", {}).get("uri")
        result = by_file.get(uri)
        if result is None or not result.fixes or item.get("level") != "error" or not suggestable(result.fixes[0]):
            continue
        fix = result.fixes[0]
        item["fixes"] = [{
            "description": {"text": f"{fix.description} (verified, {confirmation_of(fix)} on real ranks; "
                                    f"communication cost {fix.comm_cost:.3g} µs/step)"},
            "artifactChanges": [{
                "artifactLocation": {"uri": uri},
                "replacements": [{"deletedRegion": {"startLine": b.start, "endLine": b.end},
                                  "insertedContent": {"text": b.text}}
                                 for b in suggestion_blocks(result.source, fix.patched)]}]}]
    return json.dumps(sarif, indent=2, default=str)


def review(base_ref: str, repo_dir: str | Path = ".", *, files: list[str] | None = None, options=None,
           top_k: int = 1, progress: Progress = None) -> tuple[dict[str, Any], str]:
    """(review JSON body for GitHub's "create a review" call, SARIF text).

    ``files`` (paths relative to ``repo_dir``) replaces ``git diff --name-only REF``; then every
    line may carry a comment.
    """
    body, sarif, _ = run_review(base_ref, repo_dir, files=files, options=options, top_k=top_k, progress=progress)
    return body, sarif


def _has_distributed_code(path: Path) -> bool:
    from frontends.source import parse, uses_distributed
    from frontends.values import UserError

    from .safe_write import read_source

    try:
        source = parse(read_source(path).text, str(path))
    except (UserError, OSError, UnicodeDecodeError, SyntaxError, LookupError, RecursionError):
        return True  # let the check report what is wrong with the file
    return uses_distributed(source, source.module)


MAX_CALLER_SCAN = 5000   # tracked Python files read to find who imports a changed module


def _module_names(name: str) -> set[str]:
    """Dotted names a file of the repository may be imported as (``a/b/c.py`` -> a.b.c, b.c, c)."""
    parts = list(Path(name).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return {".".join(parts[i:]) for i in range(len(parts))} if parts else set()


def _imports(path: Path, own: str) -> set[str]:
    """Modules ``path`` imports, relative imports resolved against its own place ``own`` (a/b/c.py)."""
    import ast

    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError):
        return set()
    package = list(Path(own).parent.parts)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*up, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" if base else alias.name for alias in node.names}
    return found


def callers(changed: list[str], repo: Path) -> dict[str, str]:
    """Tracked Python files, not changed themselves, that import a changed file: caller -> changed file."""
    try:
        tracked = [n for n in _git(repo, "ls-files", "-z", "--", "*.py").split("\0") if n]
    except UsageError:
        return {}
    wanted = {module: name for name in changed for module in _module_names(name)}
    found: dict[str, str] = {}
    for name in tracked[:MAX_CALLER_SCAN]:
        if name in changed:
            continue
        hit = next((wanted[m] for m in sorted(_imports(repo / name, name)) if m in wanted), None)
        if hit is not None:
            found[name] = hit
    return found


def run_review(base_ref: str, repo_dir: str | Path = ".", *, files: list[str] | None = None, options=None,
               top_k: int = 1, progress: Progress = None) -> tuple[dict[str, Any], str, list[FileResult]]:
    repo = Path(repo_dir)
    names = files if files is not None else changed_files(base_ref, repo)
    calling = callers(names, repo)   # entries that call changed code are checked too
    results, skipped = [], []
    allowed: dict[str, set[int] | None] = {}
    for name in [*names, *calling]:
        path = repo / name
        if path.suffix != ".py" or not path.is_file():
            continue
        if name not in calling and not _has_distributed_code(path):   # a caller runs the changed code
            skipped.append(f"`{name}` (no distributed code)")
            continue
        try:
            source, result = check_file(path, options, progress)
        except UsageError as problem:
            skipped.append(f"`{name}` ({str(problem).split(': ', 1)[-1]})")
            continue
        # a caller's finding comes from the changed code it runs: the fix belongs there, not here
        fixes: list[SourceFix] = [] if name in calling else fixes_for(path, source, result, options, progress,
                                                                       top_k=top_k)
        result.report.file = name
        result.report.fixes = [fix.as_fix() for fix in fixes]
        why = f"calls `{calling[name]}`" if name in calling else "changed"
        results.append(FileResult(name, result.report, fixes, source, why))
        allowed[name] = set() if name in calling else None if files is not None else \
            changed_lines(base_ref, repo, name)
    comments, elsewhere = review_comments(results, allowed)
    body = {"body": review_body(results, skipped, elsewhere), "event": "COMMENT", "comments": comments}
    return body, sarif_with_fixes(results), results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verify_agent.repair.review", description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="git ref the pull request is compared with")
    parser.add_argument("--repo", default=".", help="repository checkout (default: .)")
    parser.add_argument("--review-json", default="verify-agent-review.json", help="where to write the review body")
    parser.add_argument("--sarif", default="verify-agent.sarif", help="where to write the SARIF log")
    parser.add_argument("--fail-on-violations", action="store_true", help="exit 1 when a file has violations")
    args = parser.parse_args(argv)
    try:
        body, sarif, results = run_review(args.base, args.repo, progress=lambda m: print(m, file=sys.stderr))
    except UsageError as problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    Path(args.review_json).write_text(json.dumps(body, indent=2), encoding="utf-8")
    Path(args.sarif).write_text(sarif, encoding="utf-8")
    violations = any(result.report.verdict == "violations" for result in results)
    print(f"{len(body['comments'])} review comment(s) -> {args.review_json}; SARIF -> {args.sarif}", file=sys.stderr)
    return 1 if args.fail_on_violations and violations else 0


if __name__ == "__main__":
    sys.exit(main())
