"""Candidate edit for an input seeded by rank: the ranks of one group draw different numbers.

Tensor-parallel ranks must see the same batch (and build the same replicated values); a
``torch.manual_seed(...)`` whose seed adds the rank (``i + int(os.environ["RANK"])``,
``seed + dist.get_rank()``, ``base + rank``) makes each rank draw its own.  ``same_seed`` drops the
rank term from such a seed (a seed that is the rank alone becomes ``0``), on every such call of the
file: where the run goes wrong is where the drawn value is used, not where the seed is set.

Candidates are text only; each is traced, proven and run on real ranks before it is shown (a seed
that must differ per rank, data parallelism's, is refuted there, never shown).
"""
from __future__ import annotations

import re
from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name

_RANK_NAME = re.compile(r"^(?:\w+_)?rank$|^rank_\w+$", re.I)


def _is_rank(editor: SourceEditor, node: cst.CSTNode) -> bool:
    """The node reads the rank: ``dist.get_rank()``, ``os.environ["RANK"]``, a ``rank`` name (``tp_rank``)."""
    if any(call_name(call) in ("get_rank", "get_local_rank", "get_tensor_model_parallel_rank")
           for call in m.findall(node, m.Call())) or \
            (isinstance(node, cst.Call) and call_name(node) in ("get_rank", "get_local_rank")):
        return True
    text = editor.code(node)
    if re.search(r"""["'](?:LOCAL_)?RANK["']""", text):
        return True
    names = [node] if isinstance(node, cst.Name) else list(m.findall(node, m.Name()))
    return any(_RANK_NAME.match(name.value) for name in names)


def _without_rank(editor: SourceEditor, node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``node`` with its rank term dropped from a sum; None when it has none or it cannot be dropped."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        if _is_rank(editor, node.right) and not _is_rank(editor, node.left):
            return node.left
        if _is_rank(editor, node.left) and not _is_rank(editor, node.right):
            return node.right
        left = _without_rank(editor, node.left)
        if left is not None and not _is_rank(editor, node.right):
            return node.with_changes(left=left)
        return None
    if _is_rank(editor, node) and not isinstance(node, cst.BinaryOperation):
        return cst.Integer("0")
    return None


def same_seed(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    editor = SourceEditor(source, path)
    changed = []
    for call in m.findall(editor.module, m.Call()):
        if call_name(call) not in ("manual_seed", "seed") or len(call.args) != 1:
            continue
        seed = call.args[0].value
        if not _is_rank(editor, seed):
            continue
        new = _without_rank(editor, seed)
        if new is None:
            continue
        changed.append((editor.line_of(call), editor.code(seed), editor.module.code_for_node(new)))
        editor.replace(seed, new)
    if not changed:
        return
    line, old, new = changed[0]
    more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
    yield (f"seed on line {line} the same on every rank: `{old}` -> `{new}`{more}", editor.render(),
           0 if any(abs(line - site.line) <= 3 for line, _, _ in changed) else 2)
