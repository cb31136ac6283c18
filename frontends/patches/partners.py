"""Candidate edits for a point-to-point call whose partner is missing: a send nobody receives, a
receive nobody sends to (the traced run's ``p2p`` finding names the orphan's line).

Only where the orphan's function has fewer calls of the partner's kind (a function that pairs its
sends and receives is left alone).  The partner is written beside the orphan, so every rank runs both sides, in the file's spelling:

* an orphan ``isend(t, dst=Q)`` / ``send(t, dst=Q)`` gets ``recv(t', src=P)``: after an ``isend``,
  and as an ``irecv`` posted before a blocking ``send`` and waited on after it;
* an orphan ``recv(b, src=P)`` / ``irecv(b, src=P)`` gets ``isend(b', dst=Q)`` posted before it and
  waited on after it.

``P`` and ``Q`` are the file's own peer expressions (the ``src=``/``dst=`` of its point-to-point
calls, the names it gives its neighbours: ``nxt``/``prev``), the opposite of the orphan's peer
first; ``(rank + 1) % world`` also yields ``(rank - 1) % world`` and the reverse.  The partner's
buffer is the orphan's with ``rank`` read as the partner's rank: what rank ``r`` receives from
``P(r)`` is what ``P(r)`` sent, so ``blocks[(rank - step - 1) % world]`` received from ``prev`` is
sent as ``blocks[(nxt - step - 1) % world]`` to ``nxt``.  Every pairing is tried; each candidate
is traced, proven and run on real gloo ranks before it is shown.
"""
from __future__ import annotations

import re
from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import CannotPatch, SourceEditor, call_name

_SENDS = ("send", "isend")
_RECVS = ("recv", "irecv")
_PEER_KEYWORD = {"send": "dst", "isend": "dst", "recv": "src", "irecv": "src"}
_RANK = re.compile(r"\brank\b")


def _p2p_call(statement: cst.CSTNode) -> cst.Call | None:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
    return value if isinstance(value, cst.Call) and call_name(value) in _SENDS + _RECVS else None


def _argument(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None]
    return positional[position].value if len(positional) > position else None


def _opposite(peer: str) -> str | None:
    """``(rank + 1) % world`` <-> ``(rank - 1) % world`` (a ring's other neighbour), textually."""
    if re.search(r"\brank\s*\+", peer):
        return re.sub(r"\brank\s*\+", "rank - ", peer, count=1).replace("  ", " ")
    if re.search(r"\brank\s*-", peer):
        return re.sub(r"\brank\s*-", "rank + ", peer, count=1).replace("  ", " ")
    return None


def _peers(editor: SourceEditor, scope: cst.CSTNode) -> list[str]:
    """Peer expressions the function uses: its point-to-point ``src=``/``dst=`` and the names it
    assigns from ``rank`` plus or minus something modulo a size (``nxt``, ``prev``)."""
    found: list[str] = []
    for call in m.findall(scope, m.Call()):
        name = call_name(call)
        if name in _PEER_KEYWORD:
            peer = _argument(call, _PEER_KEYWORD[name], 1)
            if peer is not None:
                found.append(editor.code(peer))
    for assign in m.findall(scope, m.Assign()):
        targets = assign.targets[0].target if len(assign.targets) == 1 else None
        values = [assign.value]
        names = [targets]
        if isinstance(targets, cst.Tuple) and isinstance(assign.value, cst.Tuple):
            names = [e.value for e in targets.elements]
            values = [e.value for e in assign.value.elements]
        for name, value in zip(names, values):
            if isinstance(name, cst.Name) and _modulo_of_rank(editor, value):
                found.append(name.value)
    return list(dict.fromkeys(found))


def _modulo_of_rank(editor: SourceEditor, value: cst.BaseExpression) -> bool:
    """``(rank +- k) % world``: a neighbour's rank."""
    return (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Modulo)
            and bool(_RANK.search(editor.code(value.left))))


def _as_rank(editor: SourceEditor, buffer: cst.BaseExpression, partner_rank: str) -> str:
    """``buffer`` as the partner computes it: every ``rank`` read as ``partner_rank``."""
    def swap(node: cst.CSTNode) -> cst.CSTNode:
        return cst.parse_expression(partner_rank) if m.matches(node, m.Name("rank")) else node

    class Swap(cst.CSTTransformer):
        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:   # noqa: N802
            return swap(updated)

    return editor.code(buffer.visit(Swap()))


def add_partner(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    try:
        statement = probe.statement_at(site.line)
    except CannotPatch:
        return
    call = _p2p_call(statement)
    if call is None:
        return
    name = call_name(call)
    calls = [call_name(c) for c in m.findall(probe.function_of(statement), m.Call())]
    sends, receives = sum(c in _SENDS for c in calls), sum(c in _RECVS for c in calls)
    if (sends <= receives) if name in _SENDS else (receives <= sends):
        return   # the function pairs its sends and receives: no partner is missing here
    buffer = _argument(call, "tensor", 0)
    peer = _argument(call, _PEER_KEYWORD[name], 1)
    if buffer is None or peer is None:
        return
    peer_code = probe.code(peer)
    others = [p for p in _peers(probe, probe.function_of(statement)) if p != peer_code]
    opposite = _opposite(peer_code)
    partners = list(dict.fromkeys(([opposite] if opposite else []) + others + [peer_code]))
    sending = name in _SENDS
    for rank_as, partner_peer in enumerate(partners):
        # the partner's buffer is the orphan's at the partner's peer: rank r receives from P(r) what
        # P(r) sent (a missing receive reads the sent buffer at rank P); a missing send to Q(s) sends
        # what Q(s) receives (the received buffer at rank Q)
        editor = SourceEditor(source, path)
        here = editor.statement_at(site.line)
        dist = editor.need("torch.distributed")
        if sending:
            received = _as_rank(editor, buffer, partner_peer)
            if name == "isend":
                editor.insert_after(here, f"{dist}.recv({received}, src={partner_peer})")
            else:
                handle = editor.fresh_name("recv_request")
                editor.insert_before(here, f"{handle} = {dist}.irecv({received}, src={partner_peer})")
                editor.insert_after(here, f"{handle}.wait()")
            what = f"receive `{received}` from `{partner_peer}` (the partner of the {name} on line {site.line})"
        else:
            sent = _as_rank(editor, buffer, partner_peer)
            handle = editor.fresh_name("send_request")
            editor.insert_before(here, f"{handle} = {dist}.isend({sent}, dst={partner_peer})")
            editor.insert_after(here, f"{handle}.wait()")
            what = f"send `{sent}` to `{partner_peer}` (the partner of the {name} on line {site.line})"
        yield what, editor.render(), min(rank_as, 3)
