"""A kernel's spec from the file's own reference, as the file itself calls it.

The run (``capture.py``) records each kernel launch with its tensors and every call of the
file's functions with tensor arguments (and the callable given to ``profiler.assert_allclose``).
A call whose tensors are all inputs of one launch of the kernel is that kernel's reference,
its other arguments bound as the call site gave them (``ref_program(Q, K, V, is_causal)``,
``partial(ref_program, is_causal=True)``).  No text translation: the reference is re-run
by torch on CPU at the reduced shapes under the tracing frontend's dispatcher recorder, and
its ``aten`` ops are evaluated by the verifier's op registry over the same values the
kernel's run reads (Z3 terms for the proof, floats for counterexamples), so control flow,
``einsum``, masks and dtype casts in the reference are whatever torch did.

An integer argument that names a size or tile of the kernel, or equals a real size of one of
its tensors or a named size (``ref(logits, top_k)`` beside the kernel's ``topk``), is given
its reduced value; one that matches sizes reduced differently cannot be re-run and the
reference is refused (the kernel then has no traced spec).  A sampled boolean mask is passed
as the same constant the kernel reads.

Without a reference function, the file's own expected value is the spec
(:func:`find_inline_reference`): the torch calls that computed what the file compares the
kernel's outputs with, replayed on the reduced inputs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bits import torch_dtype
from .capture import Capture, Instance, Launch, ReferenceCall
from .counterexample import is_mask, sampled_array
from .spec import SpecError

NOT_FOUND = ""  # the reason when the run shows no reference call or comparison at all (not a refusal)
_SCALED_SIZE = 16  # a reference's float n ** -0.5 is read as a size's scale from this n on
_REFERENCE = re.compile(r"(?i)(^ref|reference|torch|naive|_ref$|_ref_|^ref_)")


class _Unread:
    """The value given to a reference parameter its code never reads (a scratch buffer the file
    passes along, ``ref_program(q, kv, glse, Output_partial)``): ``None`` at the re-run."""

    def __repr__(self) -> str:
        return "unread"


UNREAD = _Unread()


def unread_parameters(func: Any) -> set[str]:
    """Parameters of ``func`` its bytecode never names (no load, store or closure cell), so no
    value passed for them can change its result; none when it could reach its locals by name."""
    import dis
    code = getattr(func, "__code__", None)
    if code is None or {"locals", "vars", "eval", "exec"} & set(code.co_names):
        return set()
    params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    named = {i.argval for i in dis.get_instructions(code) if isinstance(i.argval, str)}
    return params - named - set(code.co_cellvars)


@dataclass(frozen=True)
class Argument:
    name: str
    tensor: str | None = None  # kernel parameter bound to it
    value: Any = None
    view: Any = None  # the argument is this function of the parameter (the kernel reads a view of it)


@dataclass
class TracedSpec:
    """A spec evaluated by re-running ``func``; duck-types :class:`spec.Spec` for the checks."""

    text: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    origin: str
    func: Any = None
    arguments: tuple[Argument, ...] = ()
    real_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dtypes: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    statements: tuple = ()
    traced: bool = True
    named_sizes: dict[str, tuple[int | None, int]] = field(default_factory=dict)  # name -> (real, reduced)
    tile_sizes: dict[str, tuple[int, int]] = field(default_factory=dict)  # tiles and fixed sizes: (real, reduced)
    constants: tuple[float, ...] = ()  # floats the file computed at the real sizes (inline expected values)
    out_dtypes: dict[str, str] = field(default_factory=dict)  # the dtype of each output torch's re-run gave
    real_scales: set = field(default_factory=set)  # float arguments n ** -0.5 of no size: kept at the real value
    _cache: dict = field(default_factory=dict)

    def evaluate(self, tensors: dict[str, np.ndarray], backend: Any) -> dict[str, np.ndarray]:
        shapes = {name: tuple(np.shape(tensors[name])) for name in self.inputs}
        masks = {name: sampled_array(tensors[name]) for name in self.inputs if is_mask(tensors[name])}
        key = (tuple(sorted(shapes.items())), tuple(sorted(self.named_sizes.items())),
               tuple((n, m.tobytes()) for n, m in sorted(masks.items())))
        if key not in self._cache:
            self._cache[key] = self._record(shapes, masks)
        ops, out_names = self._cache[key]
        leaves = {n: tensors[n] for n in self.inputs if n not in masks}  # masks are constants of the recording
        return _run_ops(ops, out_names, self.outputs, leaves, backend)

    def _record(self, shapes: dict[str, tuple[int, ...]], masks: dict[str, np.ndarray]) -> tuple[tuple, list[str]]:
        import torch

        from frontends.traced.recorder import Recorder
        from frontends.traced.spans import SpanFinder
        from verifier.ir import Span
        kwargs: dict[str, Any] = {}
        spans = SpanFinder(self.path, self.path)
        recorder = Recorder(spans, simulated=False, fold_constants=True)
        generator = torch.Generator().manual_seed(0)
        leaves: dict[str, Any] = {}
        for arg in self.arguments:
            if arg.value is UNREAD:
                kwargs[arg.name] = None
                continue
            if arg.tensor is None:
                kwargs[arg.name] = self._reduced_value(arg, shapes)
                continue
            dtype = self.dtypes.get(arg.tensor, torch.float32)
            shape = shapes[arg.tensor]
            if arg.tensor in masks:  # the kernel's sampled mask or index tensor, the same values (the file's dtype)
                default = torch.bool if masks[arg.tensor].dtype == bool else torch.int64
                kwargs[arg.name] = torch.from_numpy(masks[arg.tensor].copy()).to(self.dtypes.get(arg.tensor, default))
                continue
            if arg.tensor not in leaves:
                if not dtype.is_floating_point:
                    raise SpecError(f"reference argument {arg.name} is a {dtype} tensor (only float inputs are re-run)")
                leaves[arg.tensor] = torch.randn(shape, generator=generator).to(dtype)
                recorder.bind_leaf(leaves[arg.tensor], arg.tensor, Span(None, self.path))
            kwargs[arg.name] = leaves[arg.tensor]
        try:
            with torch.no_grad(), recorder:
                for arg in self.arguments:
                    if arg.view is not None:  # recorded: the reference reads the parameter through it
                        kwargs[arg.name] = arg.view(kwargs[arg.name])
                result = self.func(**kwargs)
                flat = list(result) if isinstance(result, (tuple, list)) else [result]
                if len(flat) != len(self.outputs) or not all(isinstance(t, torch.Tensor) for t in flat):
                    raise SpecError(f"the reference returned {len(flat)} value(s) for the kernel's "
                                    f"{len(self.outputs)} output(s) {', '.join(self.outputs)}")
                names = [recorder.name_of(t, spans.span()) for t in flat]
                self.out_dtypes = {target: str(t.dtype).replace("torch.", "") for target, t in zip(self.outputs, flat)}
        except SpecError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's reference failed at the reduced sizes
            raise SpecError(f"re-running the reference at the reduced sizes failed ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:120] if str(exc) else ''})") from None
        if recorder.recording.problems:
            raise SpecError(f"the reference cannot be traced: {recorder.recording.problems[0].message}")
        return tuple(recorder.recording.ops), names

    def _reduced_value(self, arg: Argument, shapes: dict[str, tuple[int, ...]]) -> Any:
        value = arg.value
        if isinstance(value, float) and value > 0:
            return self._reduced_scale(arg.name, value)
        if not isinstance(value, int) or isinstance(value, bool):
            return value
        real, reduced_size = self.named_sizes.get(arg.name, (None, None))
        if real == value:  # the kernel's size of the same name (``groups=groups``), reduced
            return reduced_size
        reduced = {shapes[name][axis] for name, real in self.real_shapes.items() if name in shapes
                   for axis, size in enumerate(real) if size == value and axis < len(shapes[name])}
        reduced |= {small for real, small in self.named_sizes.values() if real == value}  # ``top_k`` for ``topk``
        if len(reduced) > 1:
            raise SpecError(f"reference argument {arg.name}={value} is a size of dimensions reduced to different "
                            f"sizes ({', '.join(map(str, sorted(reduced)))})")
        return reduced.pop() if reduced else value


    def _reduced_scale(self, name: str, value: float) -> float:
        """A float argument that is exactly one size, or the sum of two, to the power -0.5 at the real
        sizes (``softmax_scale = 1 / math.sqrt(dim)`` computed by the file) is computed from their
        reduced values, as the kernel's own scale is; one that several sizes reduced differently
        give is refused, and an ``n ** -0.5`` of no size is kept and remembered (a difference it may
        make is then not the kernel's)."""
        import math
        known = {n: (real, small) for n, (real, small) in {**self.tile_sizes, **self.named_sizes}.items()
                 if isinstance(real, int) and real >= 1}
        names = sorted(known)
        sums = {(a,): known[a] for a in names}
        sums.update({(a, b): (known[a][0] + known[b][0], known[a][1] + known[b][1])
                     for i, a in enumerate(names) for b in names[i + 1:]})
        ways = {key: small for key, (real, small) in sums.items()  # not 0.5 = 4 ** -0.5, a plain factor
                if real >= _SCALED_SIZE and value in (real ** -0.5, 1.0 / math.sqrt(real), 1 / real ** 0.5)}
        reduced = {float(small) ** -0.5 for small in ways.values()}
        if len(reduced) > 1:
            raise SpecError(f"reference argument {name}={value!r} is one over the square root of sizes reduced to "
                            "different values")
        if reduced:
            note = f"; {name} given {' + '.join(min(ways))} ** -0.5 at the reduced sizes"
            if note not in self.origin:
                self.origin += note
            return reduced.pop()
        root = round(value ** -2)
        if _SCALED_SIZE <= root <= 1 << 16 and value in (root ** -0.5, 1.0 / math.sqrt(root)):  # not an eps of 1e-6
            self.real_scales.add(f"{name}={value!r}")
        return value


def _run_ops(ops: tuple, out_names: list[str], outputs: tuple[str, ...], leaves: dict[str, np.ndarray],
             backend: Any) -> dict[str, np.ndarray]:
    from verifier.backends import NumpyBackend
    from verifier.backends import Z3Backend as VerifierZ3
    from verifier.traced_run import RunError, run
    symbolic = getattr(backend, "name", "") == "z3"
    xp = VerifierZ3() if symbolic else NumpyBackend()
    values = {n: (np.asarray(v, dtype=object) if symbolic else np.asarray(v, dtype=float)) for n, v in leaves.items()}
    try:
        env = run((ops,), values, xp)[0]
    except RunError as exc:
        raise SpecError(f"the reference's op is not modelled ({exc})") from None
    out: dict[str, np.ndarray] = {}
    for target, name in zip(outputs, out_names):
        value = env[name]
        out[target] = np.asarray(value, dtype=object) if symbolic else np.asarray(value, dtype=float).astype(object)
    return out


def launch_tensors(launch: Launch, params: list[str], signature: tuple[str, ...] = ()) -> dict[str, Any]:
    """Kernel parameter -> the tensor the launch passed for it.  ``signature``: every parameter of
    the PrimFunc in order, scalars among the tensors (TileLang passes arguments, and counts
    ``out_idx``, by those positions); without it, ``params`` are the positions."""
    import torch
    if launch.named:
        return {k: v for k, v in launch.named if k in params}
    positions = list(signature) if signature and set(params) <= set(signature) else list(params)
    out = {i % len(positions) for i in (launch.out_idx or ())} if positions else set()
    passed = [p for i, p in enumerate(positions) if i not in out]
    if len(passed) != len(launch.args):
        return {}
    return {p: t for p, t in zip(passed, launch.args) if p in params and isinstance(t, torch.Tensor)}


def find_reference(instances: list[Instance], params: list[str], written: list[str], capture: Capture,
                   path: str) -> tuple[list[TracedSpec], str]:
    """The traced specs of a kernel (launched as one of ``instances``): its reference, or each
    of several whose results the file compares with; none and why not."""
    import torch
    inputs = [p for p in params if p not in written]
    candidates: list[tuple[tuple, ReferenceCall, dict[str, Any], tuple[str, ...]]] = []
    kernel_names = {i.name for i in capture.instances}
    for ref in capture.references:
        if ref.via == "profiler" and _among(ref.instance, instances):
            out_idx = ref.out_idx or _instance_out_idx(ref.instance, capture)
            if out_idx is None:
                continue
            outs = {i % len(params) for i in out_idx}
            passed = [p for i, p in enumerate(params) if i not in outs]
            outputs = tuple(params[i] for i in sorted(outs))
            if any(o not in written for o in outputs):
                continue
            code = getattr(ref.func, "__code__", None)
            names = list(code.co_varnames[:code.co_argcount]) if code is not None else []
            bound = dict(ref.arguments)
            free = [n for n in names if n not in bound]
            if len(free) < len(passed):
                continue
            binding = {n: ("tensor", p) for n, p in zip(free, passed)}
            binding.update({n: ("value", v) for n, v in bound.items()})
            candidates.append(((False, False, False), ref, binding, outputs))
    by_id_all: dict[int, str] = {}
    output_ids: set[int] = set()
    uncompared: dict[int, tuple[str, ...]] = {}  # per reference call: the outputs it returns no value for
    copy_of: dict[int, tuple[str, ...]] = {}  # per reference call: its arguments given copies of the kernel's inputs
    refused: dict[int, str] = {}  # per reference call: why what it returns cannot be paired with the outputs
    for launch in capture.launches:
        if not _among(launch.instance, instances):
            continue
        tensors = launch_tensors(launch, params)
        by_id = {id(t): p for p, t in tensors.items() if p in inputs}
        copies = same_value_inputs(tensors, inputs, capture)
        by_id_all.update(by_id)
        output_ids |= {id(t) for t in dict(launch.outputs).values()} | \
            {id(t) for p, t in tensors.items() if p in written}
        viewed = _viewed_inputs(tensors, inputs, capture)
        for number, ref in enumerate(capture.references):
            if ref.via != "call" or number in capture.wrappers:
                continue
            args = dict(ref.arguments)
            scratch = {id(t) for p, t in tensors.items() if p in written}
            unread = unread_parameters(ref.func)
            args.update({n: UNREAD for n, v in args.items()  # a buffer the kernel writes, never read by it
                         if isinstance(v, torch.Tensor) and id(v) in scratch and id(v) not in by_id and n in unread})
            arg_tensors = {n: v for n, v in args.items() if isinstance(v, torch.Tensor)}
            func_name = getattr(ref.func, "__name__", "")
            if not arg_tensors or func_name in kernel_names:  # the kernel's own function, run by TileLang
                continue
            if any(id(v) not in by_id and id(v) not in viewed for v in arg_tensors.values()):
                # passed copies of the kernel's inputs (``q_ref`` beside the kernel's ``q_tl``): taken
                # only when it reads a copy of each of them, as a reference does
                copied = {n: next((copies[id(c)] for c in _copied_from(v, capture) if id(c) in copies), None)
                          for n, v in arg_tensors.items()}
                if None in copied.values() or set(copied.values()) != set(by_id.values()):
                    continue
                binding = {n: ("tensor", copied[n]) if n in copied else ("value", v) for n, v in args.items()}
                copy_of[id(ref)] = tuple(n for n, v in arg_tensors.items() if id(v) not in by_id)
            else:
                binding = {n: ("value", v) if not isinstance(v, torch.Tensor) else ("tensor", by_id[id(v)])
                           if id(v) in by_id else ("view", viewed[id(v)]) for n, v in args.items()}
            read = {kind_value[1] if kind_value[0] == "tensor" else kind_value[1][0]
                    for kind_value in binding.values() if kind_value[0] != "value"}
            # rank: reads every input of the kernel, is named after it, is named like a reference
            rank = (len(read) < len(set(by_id.values())),
                    instances[0].name.lower() not in func_name.lower(), not _REFERENCE.search(func_name))
            outputs = _returned_outputs(launch, params, written, capture)
            outputs, uncompared[id(ref)] = _compared_outputs(number, outputs, launch, params, written, capture)
            combined = _compared_with_combined_outputs(number, outputs, launch, params, written, capture)
            if combined:
                refused[id(ref)] = f"{getattr(ref.func, '__name__', 'the reference')}'s result is compared {combined}"
            candidates.append((rank, ref, binding, outputs))
    if not candidates:
        return [], NOT_FOUND
    candidates.sort(key=lambda c: c[0])
    best = candidates[0][0]
    if best[0]:  # even the best reads only some of the kernel's inputs: the kernel is not that function
        _, ref, binding, _ = candidates[0]
        read = {value if kind == "tensor" else value[0] for kind, value in binding.values() if kind != "value"}
        unread = sorted(set(by_id_all.values()) - read)
        return [], (f"{getattr(ref.func, '__name__', 'a function')} is called with only some of the kernel's inputs "
                    f"(not {', '.join(unread)}): it is not the kernel's reference")
    # the functions whose results the file compares the kernel's outputs with, each checked;
    # else the best-ranked function, when it is the only one
    compared = {id(other) for a, b, _ in compared_pairs(capture)
                for mine, other in ((a, b), (b, a)) if id(mine) in output_ids}
    chosen: dict[int, tuple] = {}  # one call per function, in the order of the ranking
    for candidate in candidates:
        if _result_compared(candidate[1], capture, compared) and not candidate[0][0]:
            chosen.setdefault(id(candidate[1].func), candidate)
    if not chosen:
        for candidate in candidates:
            if candidate[0] == best:
                chosen.setdefault(id(candidate[1].func), candidate)
        if len(chosen) > 1:
            names = sorted({getattr(c[1].func, "__name__", "?") for c in candidates if c[0] == best})
            return [], (f"several functions are called with the kernel's inputs ({', '.join(names)}) and the file "
                        "compares none of their results with the kernel's")
    why = [refused[id(c[1])] for c in chosen.values() if id(c[1]) in refused]
    if why:
        return [], why[0]
    return [_traced_spec(ref, binding, outputs, written, instances, params, capture, path, uncompared.get(id(ref), ()),
                         copy_of.get(id(ref), ()))
            for _, ref, binding, outputs in chosen.values()], ""


def _traced_spec(ref: ReferenceCall, binding: dict[str, tuple[str, Any]], outputs: tuple[str, ...],
                 written: list[str], instances: list[Instance], params: list[str], capture: Capture,
                 path: str, uncompared: tuple[str, ...] = (), copies: tuple[str, ...] = ()) -> TracedSpec:
    real_shapes, dtypes = _launched_shapes(instances, params, capture)
    arguments = tuple(Argument(n, value) if kind == "tensor" else Argument(n, value[0], view=value[1])
                      if kind == "view" else Argument(n, None, value) for n, (kind, value) in binding.items())
    used = tuple(dict.fromkeys(a.tensor for a in arguments if a.tensor))
    name = getattr(ref.func, "__name__", "reference")
    shown = ", ".join(f"{a.tensor}.{a.view.__name__}" if a.view is not None else a.tensor or f"{a.name}={a.value!r}"
                      for a in arguments)
    line = f" (line {ref.line})" if ref.line else ""
    via = " via profiler.assert_allclose" if ref.via == "profiler" else ""
    sizes = [a.name for a in arguments
             if a.tensor is None and isinstance(a.value, int) and not isinstance(a.value, bool)]
    unread = [a.name for a in arguments if a.value is UNREAD]
    if unread:
        via += f"; {', '.join(unread)} passed buffers the kernel writes, which {name} never reads (given None)"
    if copies:
        via += (f"; {', '.join(copies)} given the kernel's input{'s' if len(copies) > 1 else ''}, of which the "
                "file passes an unchanged copy (clone, detach, contiguous, a device move, a view of the same shape)")
    if sizes:
        via += f"; {', '.join(sizes)} given the reduced value of the size each names or equals"
    if uncompared:
        via += (f"; {', '.join(uncompared)} not compared (the reference returns no value for "
                f"{'it' if len(uncompared) == 1 else 'them'}; the file compares its result with {', '.join(outputs)})")
    scratch = [w for w in written if w not in outputs and w not in uncompared]
    if scratch:
        via += f"; {', '.join(scratch)} written but not returned by the kernel: not compared"
    return TracedSpec(text=f"{', '.join(outputs)} = {name}({shown})", inputs=used, outputs=outputs,
                      origin=f"{name}{line}{via}, re-run by torch at the reduced sizes", func=ref.func,
                      arguments=arguments, real_shapes=real_shapes, dtypes=dtypes, path=path)


def named_reference(func: Any, inputs: list[str], written: list[str], instances: list[Instance],
                    params: list[str], capture: Capture, path: str, dtypes: dict[str, str]) -> TracedSpec | None:
    """The file's reference function by name (``ref_program``), its parameters bound to the
    kernel's inputs in order as TileLang's profiler calls it, re-run by torch at the reduced
    sizes: for a reference the text translation cannot read (``einsum``, ``rearrange``, control
    flow) that the file never calls itself.  None when it takes other than one tensor per input
    (keywords, defaults or ``*args`` make the binding a guess), when its parameters are not the
    kernel's inputs' names in the same order (up to case), or when it is not a plain function."""
    import inspect

    import torch
    code = getattr(func, "__code__", None)
    if code is None or not inspect.isfunction(func) or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) \
            or code.co_kwonlyargcount or func.__defaults__ or code.co_argcount != len(inputs):
        return None
    names = list(code.co_varnames[:code.co_argcount])
    if [n.lower() for n in names] != [p.lower() for p in inputs]:  # (q, q_pe, kv) for (Q, Q_pe, KV) only
        return None
    binding = {n: ("tensor", p) for n, p in zip(names, inputs)}
    ref = ReferenceCall(func, (), via="name", line=code.co_firstlineno)
    spec = _traced_spec(ref, binding, tuple(written), written, instances, params, capture, path)
    for name in inputs:  # a kernel never launched by the file: its buffers' dtypes
        if name not in spec.dtypes and dtypes.get(name):
            spec.dtypes[name] = torch_dtype(dtypes[name]) or torch.float32
    spec.origin = spec.origin.replace(", re-run by torch", " (not called by the file: bound to the kernel's inputs "
                                      "in order, as TileLang's profiler calls a reference), re-run by torch")
    return spec


# copies that change no element when they keep the dtype and the shape (``x.view(-1, N)`` of an (M, N) ``x``)
_SAME_VALUES = ("clone", "detach", "contiguous", "cuda", "cpu", "to", "view", "reshape", "flatten")


def _copied_from(tensor: Any, capture: Capture) -> list[Any]:
    """``tensor`` and the tensors it was copied from unchanged (``x.detach().clone()``,
    ``x.cuda()``), nearest first, as long as none of them was changed in place."""
    import torch
    chain = [tensor]
    while True:
        made = capture.derivations.get(id(chain[-1]))
        if made is None or made.func is None or made.index is not None or not made.args \
                or not isinstance(made.args[0], torch.Tensor) \
                or getattr(made.func, "__name__", "") not in _SAME_VALUES \
                or any(isinstance(a, torch.Tensor) for a in list(made.args[1:]) + list(made.kwargs.values())):
            return chain
        before = made.args[0]
        changed = capture.derivations.get(id(before))
        if before.dtype != chain[-1].dtype or tuple(before.shape) != tuple(chain[-1].shape) \
                or (changed is not None and changed.func is None):
            return chain
        chain.append(before)


def same_value_inputs(tensors: dict[str, Any], inputs: list[str], capture: Capture) -> dict[int, str]:
    """id of a tensor -> the kernel input that is an unchanged copy of it (``q_tl`` and ``q_ref``
    both ``query.detach().clone()``: what the file computes from ``query`` or from another copy of
    it is computed from the kernel's input).  A tensor two inputs are copies of is left out (the
    kernel's inputs are then equal, which a proof over independent inputs does not know)."""
    sources: dict[int, set[str]] = {}
    for param, tensor in tensors.items():
        if param in inputs:
            for copy in _copied_from(tensor, capture)[1:]:
                sources.setdefault(id(copy), set()).add(param)
    direct = {id(t): p for p, t in tensors.items() if p in inputs}
    return {**{key: next(iter(params)) for key, params in sources.items() if len(params) == 1}, **direct}


def _viewed_inputs(tensors: dict[str, Any], inputs: list[str], capture: Capture) -> dict[int, tuple[str, Any]]:
    """Tensors the file passed to the kernel as a view (``mix.squeeze(-1)``, ``x.transpose(1, 2)``):
    id of the viewed tensor -> (the kernel parameter, the function giving it back from the view)."""
    import torch
    out: dict[int, tuple[str, Any]] = {}
    for param, tensor in tensors.items():
        made = capture.derivations.get(id(tensor))
        if param not in inputs or made is None or made.func is None or made.kwargs or made.index is not None \
                or not made.args or not isinstance(made.args[0], torch.Tensor):
            continue
        base, rest = made.args[0], made.args[1:]
        if not all(isinstance(i, int) for r in rest for i in (r if isinstance(r, tuple) else (r,))):
            continue
        undo = _undoing_view(getattr(made.func, "__name__", ""), base, rest)
        if undo is not None:
            method, args = undo

            def inverse(view: Any, method: str = method, args: tuple = args) -> Any:
                return getattr(view, method)(*args)
            inverse.__name__ = f"{method}({', '.join(map(str, args))})"
            out[id(base)] = (param, inverse)
    return out


def _undoing_view(name: str, base: Any, rest: tuple) -> tuple[str, tuple] | None:
    """The view method and arguments that give ``base`` back from ``base.<name>(*rest)``."""
    if name == "squeeze":  # of a size-1 axis only: otherwise it changes nothing
        return ("unsqueeze", rest) if len(rest) == 1 and isinstance(rest[0], int) and base.shape[rest[0]] == 1 \
            else None
    if name in ("unsqueeze", "transpose") and len(rest) == (1 if name == "unsqueeze" else 2):
        return ("squeeze" if name == "unsqueeze" else "transpose"), rest
    if name == "permute":
        dims = tuple(rest[0]) if len(rest) == 1 and isinstance(rest[0], tuple) else rest
        return "permute", tuple(int(i) for i in np.argsort([d % base.dim() for d in dims]))
    if name == "contiguous" and not rest:
        return "contiguous", ()
    return None


def _returned_outputs(launch: Launch, params: list[str], written: list[str], capture: Capture) -> tuple[str, ...]:
    """The tensors a launch returns (``out_idx``); every written one when it returns none."""
    out_idx = launch.out_idx or _instance_out_idx(launch.instance, capture) or ()
    returned = tuple(params[i % len(params)] for i in sorted(out_idx)) if params else ()
    if not returned and launch.outputs:  # an eager kernel's ``T.empty`` outputs, in the order it returns them
        returned = tuple(name for name, _ in launch.outputs)
    return returned if returned and all(r in written for r in returned) else tuple(written)


def _compared_outputs(number: int, outputs: tuple[str, ...], launch: Launch, params: list[str], written: list[str],
                      capture: Capture) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A reference returning fewer values than the kernel's outputs (the attention output, not
    its ``lse``; ``y`` without the saved mean and rstd): each value it returned is paired with
    the one kernel output the file compares it with, the rest are not compared.  When a value
    is compared with no output or several, or two with one, the outputs stay as they are (and
    the count mismatch is reported)."""
    import torch
    from torch.utils._pytree import tree_flatten
    flat = [t for t in tree_flatten(capture.results.get(number))[0] if isinstance(t, torch.Tensor)]
    if not flat or len(flat) >= len(outputs):
        return outputs, ()
    tensors = {**dict(launch.outputs), **{p: t for p, t in launch_tensors(launch, params).items() if p in written}}
    output_of = {id(t): p for p, t in tensors.items() if p in outputs}
    pairs = compared_pairs(capture)
    mapped = []
    for value in flat:
        partners = {output_of[id(other)] for a, b, _ in pairs for mine, other in ((a, b), (b, a))
                    if mine is value and id(other) in output_of}
        if len(partners) != 1:
            return outputs, ()
        mapped.append(partners.pop())
    if len(set(mapped)) != len(mapped):
        return outputs, ()
    return tuple(mapped), tuple(o for o in outputs if o not in mapped)


_RESHAPES = ("view", "reshape", "squeeze", "unsqueeze", "flatten", "contiguous", "clone", "detach")


def references_of_other_tensors(instances: list[Instance], params: list[str], written: list[str],
                                capture: Capture) -> list[str]:
    """The functions whose results the file compares with this kernel's outputs (or a reshaped
    view of them, ``post_mix.view(..., 1)``) that it called with tensors that are not the
    kernel's inputs (a reference of several kernels together: ``mhc_pre_ref(residual, fn, ...)``
    against the second kernel's outputs)."""
    import torch
    from torch.utils._pytree import tree_flatten
    output_ids: set[int] = set()
    for launch in capture.launches:
        if _among(launch.instance, instances):
            tensors = launch_tensors(launch, params)
            output_ids |= {id(t) for t in dict(launch.outputs).values()} | \
                {id(t) for p, t in tensors.items() if p in written}

    def of_output(tensor: Any) -> bool:
        for _ in range(8):
            if id(tensor) in output_ids:
                return True
            made = capture.derivations.get(id(tensor))
            if made is None or made.func is None or getattr(made.func, "__name__", "") not in _RESHAPES \
                    or not made.args or not isinstance(made.args[0], torch.Tensor):
                return False
            tensor = made.args[0]
        return False
    compared = {id(other) for a, b, _ in compared_pairs(capture) for mine, other in ((a, b), (b, a))
                if of_output(mine)}
    return sorted({getattr(ref.func, "__name__", "?") for number, ref in enumerate(capture.references)
                   if ref.via == "call" and number not in capture.wrappers
                   and any(id(leaf) in compared for leaf in tree_flatten(capture.results.get(number))[0]
                           if isinstance(leaf, torch.Tensor))})


def _compared_with_combined_outputs(number: int, outputs: tuple[str, ...], launch: Launch, params: list[str],
                                    written: list[str], capture: Capture) -> str:
    """How the file compares a value of reference call ``number`` with a tensor it computes from
    several of the kernel's outputs together (``quant.float() * scale[:, None]`` against the
    reference's one value), when the reference returns fewer values than ``outputs``: a function
    of several outputs is no spec the lifter checks; "" otherwise."""
    import torch
    from torch.utils._pytree import tree_flatten
    flat = [t for t in tree_flatten(capture.results.get(number))[0] if isinstance(t, torch.Tensor)]
    if not flat or len(flat) >= len(outputs):
        return ""
    tensors = {**dict(launch.outputs), **{p: t for p, t in launch_tensors(launch, params).items() if p in written}}
    output_of = {id(t): p for p, t in tensors.items() if p in written}
    for actual, expected, line in compared_pairs(capture):
        for mine, other in ((actual, expected), (expected, actual)):
            if not any(mine is value for value in flat) or id(other) in output_of:
                continue
            made_from = _outputs_read(other, output_of, capture)
            if len(made_from) > 1:
                at = f" at line {line}" if line else ""
                return (f"with a value the file computes from the kernel's outputs {', '.join(sorted(made_from))} "
                        f"together{at}, not with one output: a function of several outputs is not a spec the "
                        "lifter checks")
    return ""


def _outputs_read(tensor: Any, output_of: dict[int, str], capture: Capture) -> set[str]:
    """The kernel outputs the file's torch calls read to compute ``tensor``."""
    import torch
    from torch.utils._pytree import tree_flatten
    found: set[str] = set()
    stack, seen = [tensor], set()
    while stack and len(seen) < 2000:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if id(current) in output_of:
            found.add(output_of[id(current)])
            continue
        made = capture.derivations.get(id(current))
        if made is not None and made.func is not None:
            stack.extend(t for t in tree_flatten((made.args, made.kwargs))[0] if isinstance(t, torch.Tensor))
    return found


def _result_compared(ref: ReferenceCall, capture: Capture, compared: set[int]) -> bool:
    """The file compares (a tensor of) what this call returned; a profiler's reference always."""
    from torch.utils._pytree import tree_flatten
    if ref.via == "profiler":
        return True
    number = next((i for i, r in enumerate(capture.references) if r is ref), None)
    return any(id(leaf) in compared for leaf in tree_flatten(capture.results.get(number))[0])


def compared_pairs(capture: Capture) -> list[tuple[Any, Any, int | None]]:
    """(actual, expected, line) of each comparison the file made: ``assert_close``/``allclose``,
    or a function of the file called with two tensors (``calc_diff(c, ref_c)``)."""
    import torch
    pairs = [(c.actual, c.expected, c.line) for c in capture.comparisons]
    for ref in capture.references:
        compared = [v for _, v in ref.arguments if isinstance(v, torch.Tensor)]
        if ref.via == "call" and len(compared) == 2:
            pairs.append((compared[0], compared[1], None))
    return pairs


def _launched_shapes(instances: list[Instance], params: list[str], capture: Capture
                     ) -> tuple[dict[str, tuple[int, ...]], dict[str, Any]]:
    """Real shape and dtype of each tensor the kernel was launched with."""
    real_shapes, dtypes = {}, {}
    for launch in capture.launches:
        if _among(launch.instance, instances):
            for p, t in launch_tensors(launch, params).items():
                real_shapes.setdefault(p, tuple(int(d) for d in t.shape))
                dtypes.setdefault(p, t.dtype)
    return real_shapes, dtypes


def find_inline_reference(instances: list[Instance], params: list[str], written: list[str], capture: Capture,
                          path: str) -> tuple[TracedSpec | None, str]:
    """The kernel's spec from the file's own comparison of its outputs with values computed
    inline from its inputs (``torch.testing.assert_close(Y, X.softmax(dim=1))``,
    ``calc_diff(c, a.float() @ b.float().T)``): the torch calls that made the expected
    values, replayed on the reduced inputs."""
    import torch
    reason = NOT_FOUND
    pairs = compared_pairs(capture)
    for launch in capture.launches:
        if not _among(launch.instance, instances):
            continue
        tensors = launch_tensors(launch, params)
        outputs = {**dict(launch.outputs), **{p: t for p, t in tensors.items() if p in written}}
        output_of = {id(t): p for p, t in outputs.items() if p in written}
        for a, b, _ in pairs:  # an output compared in another dtype (``c.to(torch.float16)``): rounding is not modelled
            for tensor in (a, b):
                made = capture.derivations.get(id(tensor))
                if made is not None and getattr(made.func, "__name__", "") in _CASTS and made.args and \
                        id(made.args[0]) in output_of and all(isinstance(x, torch.dtype) for x in made.args[1:]) \
                        and set(made.kwargs) <= {"dtype"}:
                    output_of[id(tensor)] = output_of[id(made.args[0])]
        input_of = same_value_inputs(tensors, [p for p in tensors if p not in written], capture)
        expected: dict[str, tuple[Any, int | None]] = {}
        partners: dict[str, set[int]] = {}  # output -> ids of the values it is compared with
        for a, b, line in pairs:
            for actual, value in ((a, b), (b, a)):
                if id(actual) in output_of and id(value) not in output_of:
                    expected.setdefault(output_of[id(actual)], (value, line))
                    partners.setdefault(output_of[id(actual)], set()).add(id(value))
        if not expected:
            continue
        changed = [w for w in written
                   if w in outputs and getattr(capture.derivations.get(id(outputs[w])), "func", 0) is None]
        if changed:  # the file changed the kernel's output in place: what it compares is not what the kernel wrote
            return None, f"the file changes the kernel's output {', '.join(changed)} in place"
        missing = [w for w in written if w not in expected]
        compared = [w for w in written if w in expected]
        if missing and not _one_to_one(compared, partners):
            several = [w for w in compared if len(partners.get(w, ())) > 1]
            why = (f"{', '.join(several)} with more than one value" if several
                   else "one value with several of the kernel's outputs")
            return None, (f"the file compares {', '.join(expected)} but not {', '.join(missing)} with a value it "
                          f"computes, and {why}")
        real_shapes, dtypes = _launched_shapes(instances, params, capture)
        sizes = {d for shape in real_shapes.values() for d in shape if d > 1} | \
            {int(d) for t in outputs.values() for d in t.shape if int(d) > 1}
        targets = [expected[w][0] for w in compared]
        try:
            used, constants = _check_replay(targets, capture, input_of, sizes)
        except SpecError as exc:
            reason = str(exc)
            continue
        unread = sorted(set(input_of.values()) - set(used))
        if unread:
            reason = (f"the file's expected value is computed from only some of the kernel's inputs "
                      f"(not {', '.join(unread)})")
            continue
        lines = sorted({line for _, line in expected.values() if line})
        where = f" (line {', '.join(map(str, lines))})" if lines else ""
        origin = "the torch calls that compute it, re-run by torch at the reduced sizes"
        if missing:  # said as the reference path says it (``_traced_spec``)
            origin += (f"; {', '.join(missing)} not compared (the file compares no value with "
                       f"{'it' if len(missing) == 1 else 'them'}; it compares {', '.join(compared)})")
        spec = TracedSpec(text=f"{', '.join(compared)} = the file's own expected value{where}",
                          inputs=tuple(used), outputs=tuple(compared), origin=origin,
                          func=_replay(targets, capture, input_of),
                          arguments=tuple(Argument(p, p) for p in used), real_shapes=real_shapes, dtypes=dtypes,
                          path=path, constants=constants)
        return spec, ""
    return None, reason


def _one_to_one(compared: list[str], partners: dict[str, set[int]]) -> bool:
    """Each compared output is compared with exactly one value, and no value with two outputs."""
    values = [next(iter(partners[w])) for w in compared if len(partners.get(w, ())) == 1]
    return bool(compared) and len(values) == len(compared) and len(set(values)) == len(values)


_CASTS = ("to", "float", "half", "bfloat16", "double")
_NOT_REPLAYED = ("empty", "rand", "normal", "bernoulli", "dropout", "uniform", "multinomial", "manual_seed")


def _check_replay(targets: list[Any], capture: Capture, input_of: dict[int, str], sizes: set[int]
                  ) -> tuple[list[str], tuple[float, ...]]:
    """The kernel inputs the expected values are computed from, and the float constants the
    computation holds; SpecError when it cannot be replayed at other sizes."""
    import torch
    from torch.utils._pytree import tree_flatten
    used: dict[str, None] = {}
    constants: set[float] = set()
    seen: set[int] = set()
    stack = list(targets)
    while stack:
        tensor = stack.pop()
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        if id(tensor) in input_of:
            used[input_of[id(tensor)]] = None
            continue
        made = capture.derivations.get(id(tensor))
        if made is None or made.func is None:
            raise SpecError("an expected value the file compares with is changed in place or not computed from "
                            "the kernel's inputs")
        name = getattr(made.func, "__name__", "?")
        values = [part for leaf in tree_flatten((made.args, made.kwargs))[0]
                  for part in ((leaf.start, leaf.stop, leaf.step) if isinstance(leaf, slice) else (leaf,))]
        if name == "__getitem__" and _whole_slices(made):  # ``full[..., :SEQ_LEN]`` of a SEQ_LEN axis: no change
            values = [v for v in values if isinstance(v, torch.Tensor)]
        if any(word in name for word in _NOT_REPLAYED) or not any(isinstance(v, torch.Tensor) for v in values):
            held = sorted({v for v in values if isinstance(v, int) and not isinstance(v, bool) and v in sizes})
            if held:
                shown = ", ".join(repr(v) for v in made.args if not isinstance(v, torch.Tensor))
                raise SpecError(f"the file computes an expected value from {name}({shown}), not from the kernel's "
                                f"inputs, with {', '.join(map(str, held))}, "
                                f"{'a real size' if len(held) == 1 else 'real sizes'} that the reduced sizes change")
            raise SpecError(f"an expected value the file compares with comes from {name}(...), not from the "
                            "kernel's inputs")
        for value in values:
            if isinstance(value, torch.Tensor):
                stack.append(value)
            elif isinstance(value, int) and not isinstance(value, bool) and value in sizes:
                raise SpecError(f"the file computes an expected value with {name}(..., {value}, ...), a real size "
                                "that the reduced sizes change")
            elif isinstance(value, float):
                constants.add(value)
        if len(seen) > 2000:
            raise SpecError("the file's expected values take more than 2000 torch calls")
    if not used:
        raise SpecError("the file's expected values read none of the kernel's inputs")
    return list(used), tuple(sorted(constants))


def _whole_slices(made: Any) -> bool:
    """``x[..., :n, :n]`` that keeps every element of ``x``: each slice from 0 by 1 up to at least
    its axis's real length, which it still is at the reduced sizes (never longer)."""
    import torch
    if len(made.args) != 2 or made.kwargs or not isinstance(made.args[0], torch.Tensor):
        return False
    tensor, index = made.args
    index = index if isinstance(index, tuple) else (index,)
    if not index or not all(isinstance(i, slice) or i is Ellipsis for i in index) or \
            sum(i is Ellipsis for i in index) > 1 or len(index) - (Ellipsis in index) > tensor.dim():
        return False
    at = index.index(Ellipsis) if Ellipsis in index else len(index)
    axes = list(range(at)) + list(range(tensor.dim() - (len(index) - at - 1), tensor.dim()))
    for item, axis in zip([i for i in index if i is not Ellipsis], axes):
        if item.start not in (None, 0) or item.step not in (None, 1) or \
                not (item.stop is None or (isinstance(item.stop, int) and item.stop >= tensor.shape[axis])):
            return False
    return True


def _replay(targets: list[Any], capture: Capture, input_of: dict[int, str]) -> Any:
    """A function of the kernel's inputs (by parameter name) that redoes the file's torch calls."""
    def run(**inputs: Any) -> tuple:
        import torch
        from torch.utils._pytree import tree_map
        memo: dict[int, Any] = {}

        def value(x: Any) -> Any:
            if not isinstance(x, torch.Tensor):
                return x
            if id(x) in input_of:
                return inputs[input_of[id(x)]]
            if id(x) not in memo:
                memo[id(x)] = apply(capture.derivations[id(x)])
            return memo[id(x)]

        def apply(made: Any) -> Any:
            name = getattr(made.func, "__name__", "")
            args = list(tree_map(value, made.args))
            kwargs = {k: tree_map(value, v) for k, v in made.kwargs.items() if k != "device"}
            if name in ("cuda", "cpu") or (name == "__getitem__" and _whole_slices(made)):
                return args[0]  # a device move, or a slice keeping every element: whole at any size
            if name == "to":  # the device moves of the file's run: CPU here
                args = [args[0]] + [a for a in args[1:] if not isinstance(a, (str, torch.device, int))]
                if len(args) == 1 and not kwargs:
                    return args[0]
            out = made.func(*args, **kwargs)
            return out[made.index] if made.index is not None else out

        return tuple(value(t) for t in targets)

    return run


def _among(instance: Instance | None, instances: list[Instance]) -> bool:
    """By identity: instances hold tensors, whose ``==`` is element-wise."""
    return any(instance is other for other in instances)


def _instance_out_idx(instance: Instance, capture: Capture) -> tuple[int, ...] | None:
    for launch in capture.launches:
        if launch.instance is instance and launch.out_idx is not None:
            return launch.out_idx
    value = getattr(instance.jit, "out_idx", None) if instance.jit is not None else None
    if value is None:
        return None
    return (value,) if isinstance(value, int) else tuple(int(v) for v in value)


def is_traced(spec: Any) -> bool:
    return bool(getattr(spec, "traced", False))


