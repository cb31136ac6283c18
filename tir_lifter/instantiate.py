"""Turn one recorded kernel instance into a small PrimFunc TileLang itself builds.

Runs in the elaboration child.  The instance's integer arguments are sorted into

* tile sizes (``block_M``, ``tile_n``, ``BLOCK``, ``chunk``...): replaced by distinct powers
  of two (2, 4, 8, ... in the order of their real values), so a tile-size mix-up
  (``k * block_N`` where ``block_K`` is meant) changes the reduced program;
* counts (``split_k``, ``num_split``): at most 2;
* settings that do not change what is computed (``threads``, ``num_stages``): kept;
* problem sizes (everything else, and the ``T.const`` sizes of eager kernels): passed to
  TileLang as symbolic TIR variables, so the PrimFunc keeps them as names and
  ``sizes.plan`` chooses their reduced values; a size the kernel needs as a Python int
  (``T.gemm`` tile shapes, Python arithmetic) gets the smallest value with the same
  divisibility by every tile as the real one.

The same elaboration at the real tile values pairs each division of the reduced program
with its real counterpart, so the reduction keeps the real tiling cases (exact multiple or
partial boundary tile).
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable

from .capture import REAL_SM_COUNT, Instance, sm_count, sm_count_reads
from .errors import Rejected, Unsupported
from .program import BinOp, Const, Kernel, Var, uses_thread_index

_TILE = re.compile(r"(?i)(block|tile|blk|chunk|^b[mnkhd]$|^b_?[mnkhd]$|^bs_|_bs$|^bsz|window_size$)")
_COUNT = re.compile(r"(?i)(split|^num_(?!stages|threads|bits)|_parts?$)")
_KEEP = re.compile(r"(?i)(thread|stage|raster|swizzle|policy|k_pack|warp|bits|^sm|version|^use_|^enable|^is_|"
                   r"seed|dtype|^group_size$|^rep$|^warmup$)")
_MISSING_CONST = re.compile(r"constexpr variable `(\w+)`")
_THREAD_COUNT = re.compile(r"(?i)thread")  # a block's thread count given as an argument (threads=256)
_TILE_COUNT = re.compile(r"(?i)(tiles|blocks|chunks|iters)$")  # how many tiles, not how large one is
SM_COUNT_NAME = _SMS = "num_sms"  # the stand-in GPU's SM count, a count of the build (see _with_sm_count)


@dataclass(frozen=True)
class Elaborated:
    """A lifted reduced instance: ``kernel`` has symbolic problem sizes with their real
    values in ``kernel.sizes``; ``divisions`` pairs its divisions with the real ones."""

    kernel: Kernel
    divisions: tuple[tuple[BinOp, BinOp], ...]
    tiles: tuple[tuple[str, int, int], ...]  # name, real value, reduced value
    fixed: tuple[tuple[str, int, int], ...]  # problem sizes TileLang needs as ints: real, reduced
    dynamic: tuple[str, ...] = ()  # sizes the kernel takes at run time (T.dynamic / T.symbolic)
    derived: tuple[str, ...] = ()  # counts given by the sizes they count the tiles of
    counts: tuple[tuple[str, int, int], ...] = ()  # split_k, num_split, ...: real, reduced
    # comparisons of a constant with sizes (T.min(T.ceildiv(K, block_K), 8)): below (-1), at (0) or
    # above (1) the constant at the real sizes, the case the reduced sizes must keep
    comparisons: tuple[tuple[BinOp, int], ...] = ()
    raised: str = ""  # why the tiles are larger than 2, 4, 8, ...
    real_built: bool = True  # the same build at the real tiles and sizes succeeded

    def describe(self) -> str:
        changed_counts = tuple(c for c in self.counts if c[1] != c[2])
        parts = [f"{n}={r} (from {o})" for n, o, r in self.tiles + self.fixed + changed_counts] + list(self.derived)
        return ", ".join(parts + ([self.raised] if self.raised else []))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tensor_shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    if shape is None or isinstance(value, (int, float, str)):
        return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


def _module_sizes(func: Any) -> dict[str, int]:
    """Integer globals of the file that the kernel's code (nested functions included) reads by
    name (``M = 8192`` at module level): sizes like its arguments."""
    namespace = getattr(func, "__globals__", None)
    code = getattr(func, "__code__", None)
    if namespace is None or code is None:
        return {}
    names: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if hasattr(c, "co_names"))
    sizes = {n: namespace[n] for n in sorted(names) if _is_int(namespace.get(n)) and namespace[n] >= 2}
    computed = sorted(set(sizes) & _computed_module_names(namespace.get("__file__")))
    if computed:  # ``tiles = M // BLOCK`` keeps its real value at any reduced size: no instance is faithful
        raise Unsupported(None, f"the kernel reads {computed[0]}, an integer the file computes at module level "
                          "from its real sizes, which reduced sizes would not recompute")
    return sizes


def _computed_module_names(path: Any) -> set[str]:
    """Names the file's module-level code assigns anything but an integer literal."""
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, TypeError, ValueError, SyntaxError):
        return set()
    computed: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:  # module-level statements, inside if/for/with/try too, not function or class bodies
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)) else []
        value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        for target in targets:  # ``M = 96``, ``M, N, K = 4096, 4096, 4096`` are literal
            pairs = list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and \
                isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) else [(target, value)]
            for name, given in pairs:
                if not (isinstance(name, ast.Name) and isinstance(given, ast.Constant) and isinstance(given.value, int)):
                    computed.update(n.id for n in ast.walk(name) if isinstance(n, ast.Name))
    return computed


def _with_module_sizes(func: Any, sizes: dict[str, int], build: Callable[[dict], Any]) -> Callable[[dict], Any]:
    """``build`` with the file's module-level sizes set to the values asked for while TileLang builds."""
    if not sizes:
        return build
    namespace = func.__globals__

    def build_with(kwargs: dict[str, Any]) -> Any:
        saved = {n: namespace[n] for n in sizes}
        namespace.update({n: kwargs[n] for n in sizes if n in kwargs})
        try:
            return build({k: v for k, v in kwargs.items() if k not in sizes})
        finally:
            namespace.update(saved)
    return build_with


def elaborate_instance(instance: Instance, lift: Callable[[Any, str], Kernel], tied: bool = False,
                       sms: int = 2, shift: int = 0) -> Elaborated:
    """Reduce ``instance`` and lift the PrimFunc TileLang builds for it (``tied``: tiles equal in
    the call reduced alike, the file's own case, instead of made distinct; ``sms``: the stand-in
    GPU's SM count in the reduced build, when the build asks for it; ``shift``: tiles 2, 4, 8, ...
    times ``2 ** shift``, never above their real values)."""
    if instance.factory is not None:
        arguments = dict(instance.kwargs)
        module = {k: v for k, v in _module_sizes(instance.factory).items() if k not in arguments}
        build = _with_module_sizes(instance.factory, module, lambda kwargs: instance.factory(**kwargs))
        return _reduce_and_lift(instance, {**arguments, **module}, {}, build, lift, tied, sms, shift)
    if instance.primfunc is not None:  # a module-level PrimFunc: checked at its own (literal) sizes
        return Elaborated(lift(instance.primfunc, instance.name), (), (), ())
    jit = instance.jit
    params = jit.signature.parameters
    given = dict(instance.kwargs)
    extra = {k: v for k, v in given.items() if k not in params}  # eager T.const sizes given by name
    try:
        bound = jit.signature.bind_partial(*instance.args, **{k: v for k, v in given.items() if k in params})
    except TypeError as exc:
        raise Unsupported(instance.line, f"the recorded call does not match {instance.name}'s signature ({exc})") from None
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments.update(extra)
    tensors = {k: _tensor_shape(v) for k, v in arguments.items() if _tensor_shape(v) is not None}
    for name in tensors:
        arguments[name] = None

    function = getattr(jit.func, "orig_func", jit.func)
    module = {k: v for k, v in _module_sizes(function).items() if k not in arguments and k not in params}
    arguments.update(module)

    def build(kwargs: dict[str, Any]) -> Any:
        return jit.get_tir(**kwargs)
    return _reduce_and_lift(instance, arguments, tensors, _with_module_sizes(function, module, build), lift, tied,
                            sms, shift)


def _reduce_and_lift(instance: Instance, arguments: dict[str, Any], tensors: dict[str, tuple[int, ...]],
                     build: Callable[[dict], Any], lift: Callable[[Any, str], Kernel], tied: bool = False,
                     sms: int = 2, shift: int = 0) -> Elaborated:
    """Distinct reduced tiles first; when TileLang refuses them (a gemm needing two tiles equal
    that are equal in the real call), or their divisions cannot be paired with the real build's,
    tiles with equal real values are reduced alike: a mix-up between them changes nothing at the
    real sizes either.  A count of tiles the caller computed is given by what it counts.  The
    stand-in GPU's SM count, when the build asks for it (a persistent kernel's grid of one block
    per SM), is a count like ``num_split``: ``sms`` in the reduced build, the real one's in the real."""
    asked = _SMS not in arguments
    if asked:
        arguments, build = {**arguments, _SMS: REAL_SM_COUNT}, _with_sm_count(build)
    reads = sm_count_reads()
    elaborated = _reduce_and_lift_counted(instance, arguments, tensors, build, lift, tied, sms, shift)
    if asked and sm_count_reads() == reads:  # never asked for: not one of this kernel's sizes
        elaborated = replace(elaborated, counts=tuple(c for c in elaborated.counts if c[0] != _SMS))
    return elaborated


def _with_sm_count(build: Callable[[dict], Any]) -> Callable[[dict], Any]:
    """``build`` with the stand-in GPU reporting the SM count asked for as ``num_sms``."""
    def build_with(kwargs: dict[str, Any]) -> Any:
        rest = dict(kwargs)
        with sm_count(rest.pop(_SMS, REAL_SM_COUNT)):
            return build(rest)
    return build_with


def _reduce_and_lift_counted(instance: Instance, arguments: dict[str, Any], tensors: dict[str, tuple[int, ...]],
                             build: Callable[[dict], Any], lift: Callable[[Any, str], Kernel],
                             tied: bool = False, sms: int = 2, shift: int = 0) -> Elaborated:
    ints = {k: v for k, v in arguments.items() if _is_int(v)}
    tiles = {k: v for k, v in ints.items() if _TILE.search(k) and not _KEEP.search(k) and not _TILE_COUNT.search(k)
             and v >= 2}
    derived = _derived_counts(ints, tiles)
    if derived:  # given by the sizes they are computed from, not reduced on their own
        arguments = {k: v for k, v in arguments.items() if k not in derived}
        build = _deriving(build, derived)
    shown = tuple(f"{name} = ceildiv({size}, {tile})" for name, (size, tile) in derived.items())
    scales = _derived_scales(arguments, ints, tiles)
    if scales:  # computed from the sizes they are built with, when those are given as ints
        build = _scaling(build, scales, arguments)
    try:
        elaborated = _reduced_tiles(instance, arguments, tensors, build, lift, tiles, tied, sms, shift)
    except Unsupported as exc:
        if not exc.reason.startswith(f"{instance.name} has {_PER_THREAD}: "):
            raise
        elaborated = _per_thread_retries(instance, arguments, tensors, build, lift, tiles, ints, tied, sms, exc)
    symbolic = {n for n, _ in elaborated.kernel.sizes}
    shown += tuple(f"{name} = {names[0] if len(names) == 1 else '(' + ' + '.join(names) + ')'} ** -0.5"
                   for name, names in scales.items()
                   if not any(n in symbolic for n in names))
    return replace(elaborated, derived=shown)


def _per_thread_retries(instance: Instance, arguments: dict[str, Any], tensors: dict[str, tuple[int, ...]],
                        build: Callable[[dict], Any], lift: Callable[[Any, str], Kernel], tiles: dict[str, int],
                        ints: dict[str, int], tied: bool, sms: int, refused: Unsupported) -> Elaborated:
    """Per-thread code refused at the first reduced sizes: a thread-count argument (``threads=512``
    beside ``block_K=4096``) reduced as a tile is, so the two keep comparing as at the real sizes;
    then tiles twice and four times as large (equal real tiles alike, never past the real value),
    so a loop over ``log2(tile)`` lanes runs more than once.  The last refusal stands otherwise."""
    threads = {k: v for k, v in ints.items() if _THREAD_COUNT.search(k) and k not in tiles and v >= 2}
    tiles = {**tiles, **threads}
    trials: list[Callable[[], Elaborated]] = []
    if threads:
        trials.append(lambda: _reduced_tiles(instance, arguments, tensors, build, lift, tiles, tied, sms))
    for scale in (2, 4):
        larger = {n: min(v * scale, tiles[n]) for n, v in _tied_powers(tiles).items()}
        trials.append(lambda larger=larger: _reduce_with(instance, arguments, tensors, build, lift, tiles, larger,
                                                         sms))
    for trial in trials:
        try:
            return trial()
        except Unsupported as exc:
            if not exc.reason.startswith(f"{instance.name} has {_PER_THREAD}: "):
                raise
            refused = exc
    raise refused


def _reduced_tiles(instance: Instance, arguments: dict[str, Any], tensors: dict[str, tuple[int, ...]],
                   build: Callable[[dict], Any], lift: Callable[[Any, str], Kernel], tiles: dict[str, int],
                   tied: bool, sms: int, shift: int = 0) -> Elaborated:
    if not tied:
        return _reduced(instance, arguments, tensors, build, lift, tiles, sms, shift)
    try:
        return _reduce_with(instance, arguments, tensors, build, lift, tiles,
                            _raised_powers(tiles, _tied_powers(tiles), shift), sms)
    except Unsupported as exc:
        if not _too_small(exc):
            raise
        return _with_larger_tiles(instance, arguments, tensors, build, lift, tiles, sms, exc, shift, tied=True)


def _reduced(instance: Instance, arguments: dict[str, Any], tensors: dict[str, tuple[int, ...]],
             build: Callable[[dict], Any], lift: Callable[[Any, str], Kernel], tiles: dict[str, int],
             sms: int = 2, shift: int = 0) -> Elaborated:
    distinct = _raised_powers(tiles, _distinct_powers(tiles), shift)
    tied = _raised_powers(tiles, _tied_powers(tiles), shift)
    try:
        elaborated = _reduce_with(instance, arguments, tensors, build, lift, tiles, distinct, sms)
    except Unsupported as exc:
        per_thread = exc.reason.startswith(f"{instance.name} has {_PER_THREAD}: ")
        if per_thread and tied != distinct:
            return _reduce_with(instance, arguments, tensors, build, lift, tiles, tied, sms)
        if not _too_small(exc):
            raise
        if tied != distinct:
            try:
                return _reduce_with(instance, arguments, tensors, build, lift, tiles, tied, sms)
            except Unsupported as again:
                if not _too_small(again):
                    raise
        return _with_larger_tiles(instance, arguments, tensors, build, lift, tiles, sms, exc, shift)
    if elaborated.divisions or tied == distinct or not elaborated.kernel.sizes:
        return elaborated
    # the real build folds divisions by equal tiles together, so the reduced one cannot be paired
    # with it (its tiling cases unknown): reduced alike, the two build the same divisions
    try:
        again = _reduce_with(instance, arguments, tensors, build, lift, tiles, tied, sms)
    except Unsupported:
        return elaborated
    return again if again.divisions else elaborated


_NOT_BUILT = "TileLang could not build"
_ONE_WIDE = "a size computed from them is 1 where the real one is more"
_NEVER_RUN = "nothing in it is checked"


def _too_small(exc: Unsupported) -> bool:
    """The reduced tiles are what TileLang, the factory or its on-chip buffers refuse."""
    return exc.reason.startswith(_NOT_BUILT) or _ONE_WIDE in exc.reason or \
        (_NEVER_RUN in exc.reason and _PER_THREAD not in exc.reason)


def _with_larger_tiles(instance: Instance, arguments: dict[str, Any], tensors: dict[str, tuple[int, ...]],
                       build: Callable[[dict], Any], lift: Callable[[Any, str], Kernel], tiles: dict[str, int],
                       sms: int, failure: Unsupported, start: int = 0, tied: bool = False) -> Elaborated:
    """Tiles raised, all together and in the order of their real values, through 4, 8, 16, ...
    (``_raised_powers``, never above a real value) until TileLang builds the kernel with no
    on-chip axis 1 wide where the real one is wider: a factory asserting ``block_M == 2 *
    block_N`` or ``block_I == 64``, a layout needing a tile of 16, ``min(block_N, kv_block // 2)``
    coming out 1.  The first assignment that builds is the one checked; none: ``failure``.
    ``tied``: only tiles equal in the call reduced alike (the file's own case) are tried."""
    import time
    deadline = time.process_time() + _TILE_SEARCH_CPU_S
    budgeted = _within(build, deadline)
    # a quick look first: with the file's own sizes, tiles that still fail where the smallest ones
    # did (the same statement) are refused for the same reason, and the full search is not run;
    # only when the file's own sizes build that way at the real tiles (an eager kernel's sizes come
    # from its tensors, which this build does not have)
    orders = (_tied_powers(tiles),) if tied else (_distinct_powers(tiles), _tied_powers(tiles))
    refused = None
    at_real = _error(build, {**arguments, **tiles})
    if at_real == "no error":
        refused = _failure(build, {**arguments, **_raised_powers(tiles, orders[0], start)})
    elif f"({at_real})" in failure.reason:  # the real tiles fail the same way: not a matter of tile sizes
        raise failure
    for shift in range(start + 1, _MAX_TILE_SHIFT + 1):
        tried = []
        for powers in orders:
            raised, base = _raised_powers(tiles, powers, shift), _raised_powers(tiles, powers, start)
            if raised in tried:
                continue
            tried.append(raised)
            if refused is not None and _failure(budgeted, {**arguments, **raised}) == refused:
                continue
            try:
                elaborated = _reduce_with(instance, arguments, tensors, budgeted, lift, tiles, raised, sms)
            except Unsupported as exc:
                if not _too_small(exc):
                    raise
                if time.process_time() > deadline:
                    raise Unsupported(failure.line, f"{failure.reason}; larger tiles (up to {raised}) were tried "
                                      f"for {_TILE_SEARCH_CPU_S} CPU s without a build TileLang accepts") from None
                continue
            if not elaborated.real_built:  # larger tiles may pass where the file's own do not build
                raise Unsupported(failure.line, f"{failure.reason}; larger tiles {raised} build, but the file's own "
                                  "tiles do not, so they are not checked in their place") from None
            why = ", ".join(f"{n} from {base[n]}" for n in tiles if raised[n] != base[n])
            return replace(elaborated, raised=f"tiles raised ({why}), the smaller ones refused: {failure.reason}")
        if all(raised[n] == tiles[n] for n in tiles for raised in tried):
            break
    raise failure


_MAX_TILE_SHIFT = 7
_TILE_SEARCH_CPU_S = 30.0  # TileLang builds that fail deep in its lowering take a second each


class _OutOfTime(Exception):
    """The larger-tiles search spent its CPU time: no further build is tried."""


def _within(build: Callable[[dict], Any], deadline: float) -> Callable[[dict], Any]:
    """``build`` refusing to run once the CPU clock passes ``deadline``."""
    import time

    def build_within(kwargs: dict[str, Any]) -> Any:
        if time.process_time() > deadline:
            raise _OutOfTime("the CPU time for larger tiles is spent")
        return build(kwargs)
    return build_within


def _raised_powers(tiles: dict[str, int], base: dict[str, int], shift: int) -> dict[str, int]:
    """``base`` (2, 4, 8, ...) times ``2 ** shift``, each capped at its real value: the order of
    the real values kept, tiles distinct in ``base`` still distinct unless both reach equal real
    values."""
    return {name: min(tiles[name], value << shift) for name, value in base.items()}


def _reduce_with(instance: Instance, arguments: dict[str, Any], tensors: dict[str, tuple[int, ...]],
                 build: Callable[[dict], Any], lift: Callable[[Any, str], Kernel], tiles: dict[str, int],
                 reduced_tiles: dict[str, int], sms: int = 2) -> Elaborated:
    from tvm import tirx
    ints = {k: v for k, v in arguments.items() if _is_int(v)}
    counts = {k: v for k, v in ints.items() if k not in tiles and _COUNT.search(k) and not _KEEP.search(k)}
    problem = {k: v for k, v in ints.items() if k not in tiles and k not in counts and not _KEEP.search(k) and v >= 2}

    def symbolic(names: list[str]) -> dict[str, Any]:
        return {n: tirx.Var(n, "int32") for n in names}

    # eager kernels: sizes declared with T.const("M, N") (or named by the error TileLang raises)
    consts: list[str] = [n for n in _declared_consts(instance) if n not in ints]  # given sizes are not unknown
    base = dict(arguments)
    base.update(reduced_tiles)
    base.update({k: min(v, sms if k == _SMS else 2) for k, v in counts.items()})
    for _ in range(12):
        try:
            build(dict(base, **symbolic(consts + list(problem))))
            break
        except Exception as exc:  # noqa: BLE001 - TileLang reports missing constexprs as errors
            found = _MISSING_CONST.search(str(exc))
            if not found or found.group(1) in consts:
                break
            consts.append(found.group(1))

    chosen: list[str] = []
    concrete: dict[str, int] = {}
    loops = False  # fixed sizes raised past the factory's own assertions: its loops are compared too
    func = _try(build, dict(base, **symbolic(consts + list(problem))))
    if func is not None:
        chosen = consts + list(problem)
    else:
        # a declared size is only given symbolically (its real value comes from the tensors), so
        # every one stays symbolic while each argument size is tried symbolic on its own
        chosen = list(consts)
        for name in problem:
            trial = dict(base, **symbolic(chosen + [name]))
            if _try(build, trial) is not None:
                chosen.append(name)
        fixed = [n for n in problem if n not in chosen]
        concrete = {n: _reduced_problem(problem[n], tiles, reduced_tiles) for n in fixed}
        func = _try(build, dict(base, **concrete, **symbolic(chosen)))
        if func is None:  # the factory asserts more of its sizes (a multiple of its own tile, dim == 128)
            raised = _raised(lambda trial: build(dict(base, **trial, **symbolic(chosen))), concrete,
                             {n: problem[n] for n in concrete}, tiles, reduced_tiles)
            if raised is None:
                err = _error(build, dict(base, **concrete, **symbolic(chosen)))
                rejected = rejected_as_called(instance)
                if rejected is not None:
                    raise Rejected(rejected[1] or instance.line, f"TileLang rejects {instance.name} at the file's own "
                                   f"sizes, as the file calls it: {rejected[0]}")
                raise Unsupported(instance.line, f"TileLang could not build {instance.name} at reduced sizes ({err})")
            concrete, func = raised
            loops = True
    real_base = dict(base, **tiles, **counts)
    real_func = _try(build, dict(real_base, **{n: problem[n] for n in concrete}, **symbolic(chosen)))
    real_kernel = _lifted(lift, real_func, instance.name)
    kernel = lift(func, instance.name)
    if loops and real_kernel is None:
        raise Unsupported(instance.line, f"{instance.name} builds at raised sizes {concrete} only, and its real-size "
                          "build to compare their loops with failed")
    # per-thread code is compared with its loops below, where larger tiles are tried first
    unrun = not uses_thread_index(kernel.body)
    if real_kernel is not None and _degenerate(kernel, real_kernel, loops, unrun):
        # a size computed from the reduced ones came out 1 where the real one is more (gcd(hidden,
        # h_blk), heads // groups): an index mixed up with it would not show; larger fixed sizes
        for trial in _larger(concrete):
            lifted = _lifted(lift, _try(build, dict(base, **trial, **symbolic(chosen))), instance.name)
            if lifted is not None and not _degenerate(lifted, real_kernel, loops, unrun):
                concrete, kernel = trial, lifted
                break
        else:
            first = _degenerate(kernel, real_kernel, loops, unrun)[0]
            why = _NEVER_RUN if " runs never " in first else f"{_ONE_WIDE}, so an index mixed up with it would not show"
            raise Unsupported(instance.line, f"at the reduced sizes {first}: {why}")
    _keeps_thread_relations(kernel, real_kernel, tiles, reduced_tiles, instance)
    real_values = dict(problem)
    const_values = _const_values(kernel, consts, tensors)
    if any(c not in const_values for c in consts):
        missing = [c for c in consts if c not in const_values]
        raise Unsupported(instance.line, f"the real value of size {missing[0]} is not known (no tensor or argument "
                          "gives it)")
    real_values.update(const_values)
    dynamic = _dynamic_sizes(kernel, chosen)
    sizes = tuple((n, real_values.get(n)) for n in chosen) + tuple((n, None) for n in dynamic)
    kernel = replace(kernel, sizes=sizes, line=instance.line, grid_line=kernel.grid_line or instance.line,
                     built_at=instance.called_at)
    divisions: tuple[tuple[BinOp, BinOp], ...] = ()
    comparisons: tuple[tuple[BinOp, int], ...] = ()
    if real_kernel is not None:
        divisions = _pair_divisions(kernel, real_kernel)
        comparisons = _pair_comparisons(kernel, real_kernel, {**real_values, **{n: problem[n] for n in concrete}})
    return Elaborated(kernel, divisions, tuple((n, tiles[n], reduced_tiles[n]) for n in tiles),
                      tuple((n, problem[n], concrete[n]) for n in concrete), tuple(dynamic),
                      counts=tuple((n, v, base[n]) for n, v in counts.items()), comparisons=comparisons,
                      real_built=real_func is not None)


_PER_THREAD = "per-thread code"


def _keeps_thread_relations(kernel: Kernel, real_kernel: Kernel | None, tiles: dict[str, int],
                            reduced_tiles: dict[str, int], instance: Instance) -> None:
    """Per-thread code indexes with the thread index, so the block's thread count is one of its
    sizes: at the reduced sizes each tile must compare with it (smaller, equal, larger, dividing
    it, divided by it) as at the real ones.  A thread count kept (``threads=128``) beside a reduced
    tile (``block_N`` 128 -> 2) makes an instance the file never runs: refused, never a finding.  So
    is a loop run once where the real build runs it more often (``for i in range(log2(block_N))``
    over the lanes): what one lane exchange leaves for the next would go unchecked; and one run
    never (``block_N * block_K // (threads * 4)`` chunks)."""
    if not uses_thread_index(kernel.body):
        return
    if real_kernel is None:
        raise Unsupported(instance.line, f"{instance.name} has per-thread code and its build at the real tile sizes "
                          "failed: how its thread count compares with its tiles cannot be checked")
    for axis, (real, reduced) in enumerate(zip(real_kernel.block_threads, kernel.block_threads)):
        for name in tiles:
            t, r = tiles[name], reduced_tiles[name]
            if ((t > real) - (t < real), t % real == 0, real % t == 0) != \
                    ((r > reduced) - (r < reduced), r % reduced == 0, reduced % r == 0):
                raise Unsupported(instance.line, f"{instance.name} has {_PER_THREAD}: at the reduced sizes its "
                                  f"{reduced} threads on axis {'xyz'[axis]} (from {real}) do not compare with "
                                  f"{name}={r} (from {t}) as at the real sizes, so the reduced instance is not "
                                  "one the file runs")
    for found in _degenerate(kernel, real_kernel, loops=True):
        why = _NEVER_RUN if " runs never " in found else \
            "what one iteration leaves for the next would go unchecked"
        raise Unsupported(instance.line, f"{instance.name} has {_PER_THREAD}: at the reduced sizes {found}, so "
                          f"{why}")


def _dynamic_sizes(kernel: Kernel, chosen: list[str]) -> list[str]:
    """Symbols TileLang kept in the PrimFunc although no argument was made symbolic by us:
    sizes the kernel reads at run time (``T.dynamic("m")``, ``T.symbolic``)."""
    from .program import THREAD_INDEX, Loop, walk_stmts
    from .sizes import kernel_exprs, symbols_of
    bound = {s.var for s in walk_stmts(kernel.body) if isinstance(s, Loop)} | {a.var for a in kernel.all_axes} | \
        set(THREAD_INDEX)
    used = set().union(*(symbols_of(e) for e in kernel_exprs(kernel)))
    return sorted(used - bound - set(chosen))


def _declared_consts(instance: Instance) -> list[str]:
    source = getattr(instance.jit, "func_source", "") or ""
    names: list[str] = []
    for text in re.findall(r"T\.const\(\s*['\"]([^'\"]+)['\"]", source):
        names += [n for n in re.split(r"[\s,]+", text) if n]
    return list(dict.fromkeys(names))


def rejected_as_called(instance: Instance) -> tuple[str, int | None] | None:
    """TileLang's own operand check failing on the kernel built exactly as the file asked for it
    (``T.gemm K shape check failed: K_A = 32, K_B = 128``): its message and the line of the file
    whose statement it rejects.  Only an ``AssertionError`` raised by a module of TileLang's tile-op
    language itself (``tilelang/language/gemm_op.py``, ``tilelang/cuda/language/...``, not its
    parser or builders) counts: a failure of the target, of an API the installed TileLang lacks
    (an example written for a newer one), or of the file's own asserts is no finding, nor is an
    autotune config (the tuner skips configs that do not build)."""
    import traceback
    if instance.origin.startswith("autotune"):  # a config the tuner tries: one it cannot build is skipped
        return None
    try:
        if instance.factory is not None:
            instance.factory(**dict(instance.kwargs))
        elif instance.jit is not None:
            instance.jit.get_tir(*instance.args, **dict(instance.kwargs))
        else:
            return None
    except AssertionError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        inner = frames[-1].filename.replace("\\", "/") if frames else ""
        module = inner.split("/tilelang/", 1)[1].split("/") if "/tilelang/" in inner else []
        if len(module) not in (2, 3) or module[-2] != "language":  # not its parser, eager builder or TIR layer
            return None
        function = instance.factory or getattr(instance.jit.func, "orig_func", instance.jit.func)
        path = getattr(getattr(function, "__code__", None), "co_filename", "")
        lines = [f.lineno for f in frames if path and f.filename == path]
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}", \
            (lines[-1] if lines else None)
    except Exception:  # noqa: BLE001 - any other failure: not shown to be the kernel's
        return None
    return None


def _try(build: Callable[[dict], Any], kwargs: dict) -> Any:
    try:
        return build(kwargs)
    except Exception:  # noqa: BLE001 - any failure means "not at these arguments"
        return None


def _error(build: Callable[[dict], Any], kwargs: dict) -> str:
    try:
        build(kwargs)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    return "no error"


def _distinct_powers(tiles: dict[str, int]) -> dict[str, int]:
    """2, 4, 8, ... in the order of the real values (ties in argument order)."""
    order = sorted(tiles, key=lambda n: tiles[n])
    return {name: 2 ** (i + 1) for i, name in enumerate(order)}


def _tied_powers(tiles: dict[str, int]) -> dict[str, int]:
    """2, 4, 8, ... per distinct real value: tiles equal in the real call stay equal."""
    values = sorted(set(tiles.values()))
    return {name: 2 ** (values.index(value) + 1) for name, value in tiles.items()}


def _reduced_problem(value: int, tiles: dict[str, int], reduced: dict[str, int]) -> int:
    """Smallest size with the same divisibility by each (reduced) tile as the real one by
    the real tile, and at least as many tiles (up to 2)."""
    relevant = [(tiles[n], reduced[n]) for n in tiles if tiles[n] <= value]
    if not relevant:
        return min(value, 2)
    for candidate in range(2, 1025):
        if all((value % t == 0) == (candidate % r == 0) and candidate // r >= min(value // t, 2)
               for t, r in relevant):
            return candidate
    return max(r for _, r in relevant) * 2


_MAX_RAISE_BUILDS = 40  # TileLang builds spent looking for larger fixed sizes it accepts


def _raised(build: Callable[[dict], Any], concrete: dict[str, int], real: dict[str, int], tiles: dict[str, int],
            reduced_tiles: dict[str, int]) -> tuple[dict[str, int], Any] | None:
    """Fixed sizes raised, one at a time, through larger values that keep the real tiling case
    (up to the real value itself) until TileLang builds the kernel: a factory asserting
    ``S % 64 == 0`` or ``dim == 128`` of its own accepts no smaller one.  A raise is kept when
    the build then fails elsewhere (the next assertion), so sizes each asserted on their own are
    found one after another; at most ``_MAX_RAISE_BUILDS`` builds."""
    failure = _failure(build, concrete)
    builds = 1
    while failure is not None:
        named = _named_at(failure, concrete)
        # the sizes the failing statement names raised together first (``assert S % chunk == 0
        # and DK % BK == 0``: no single raise gets past it), then one size at a time
        for group in ([named] if len(named) > 1 else []) + [[name] for name in concrete]:
            steps = [_raise_candidates(concrete[name], real[name], tiles, reduced_tiles) for name in group]
            for index in range(max((len(s) for s in steps), default=0)):
                trial = {**concrete, **{name: s[min(index, len(s) - 1)] for name, s in zip(group, steps) if s}}
                builds += 1
                found = _failure(build, trial)
                if found is None:
                    trial = _lowered(build, trial, concrete, group)
                    return trial, build(trial)
                if found != failure:  # past the assertion that stopped it
                    concrete, failure = trial, found
                    break
                if builds >= _MAX_RAISE_BUILDS:
                    return None
            else:
                continue
            break
        else:
            return None
    return concrete, build(concrete)


def _lowered(build: Callable[[dict], Any], raised: dict[str, int], before: dict[str, int],
             group: list[str]) -> dict[str, int]:
    """Sizes raised together set back, one at a time, to their value before the raise while the
    kernel still builds: only the sizes the statement needed larger stay larger."""
    if len(group) < 2:
        return raised
    for name in group:
        trial = {**raised, name: before[name]}
        if before[name] != raised[name] and _failure(build, trial) is None:
            raised = trial
    return raised


def _named_at(failure: tuple[str, str, int], concrete: dict[str, int]) -> list[str]:
    """The fixed sizes the statement a build failed at names (all of them when it names none)."""
    import linecache
    _, path, line = failure
    try:
        tree = ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return list(concrete)
    statements = [node for node in ast.walk(tree) if isinstance(node, ast.stmt) and not hasattr(node, "body")
                  and node.lineno <= line <= (node.end_lineno or node.lineno)]
    names = {n.id for stmt in statements for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    named = [name for name in concrete if name in names]
    return named or list(concrete)


def _failure(build: Callable[[dict], Any], kwargs: dict) -> tuple[str, str, int] | None:
    """Where a build fails: the exception type, the file and line of its innermost frame."""
    try:
        build(kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure means "not at these arguments"
        frame = exc.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        where = (frame.tb_frame.f_code.co_filename, frame.tb_lineno) if frame is not None else ("", 0)
        return (type(exc).__name__, *where)
    return None


def _raise_candidates(value: int, real: int, tiles: dict[str, int], reduced: dict[str, int]) -> list[int]:
    """Larger values than ``value`` up to ``real``, doubling, that keep each tile's case (exact
    multiple or partial last tile, at least as many tiles up to 2); the real value last."""
    relevant = [(tiles[n], reduced[n]) for n in tiles if tiles[n] <= real]

    def keeps(candidate: int) -> bool:
        return all((real % t == 0) == (candidate % r == 0) and candidate // r >= min(real // t, 2) for t, r in relevant)
    out, candidate = [], value * 2
    while candidate < real:
        if keeps(candidate):
            out.append(candidate)
        candidate *= 2
    return out + ([real] if real > value else [])


def _const_values(kernel: Kernel, consts: list[str], tensors: dict[str, tuple[int, ...]]) -> dict[str, int]:
    from .program import Var
    values: dict[str, int] = {}
    for buf in kernel.params:
        shape = tensors.get(buf.name)
        if shape is None or len(shape) != len(buf.shape):
            continue
        for dim, real in zip(buf.shape, shape):
            if isinstance(dim, Var) and dim.name in consts:
                values.setdefault(dim.name, real)
    return values


def _derived_counts(ints: dict[str, int], tiles: dict[str, int]) -> dict[str, tuple[str, str]]:
    """Integer arguments named as counts of tiles that equal a size over a tile (rounded up) at
    the real values (``k_tiles = K // block_K``, ``num_blocks = ceildiv(seqlen, block_size)``):
    name -> (size, tile).  Reduced on their own they would lose that relation (the kernel then
    reads part of K); several sizes giving the same count cannot tell which one it is."""
    found: dict[str, tuple[str, str]] = {}
    for name, value in ints.items():
        if name in tiles or not _TILE_COUNT.search(name):
            continue
        ways = {(size, tile) for size, size_value in ints.items() for tile, tile_value in tiles.items()
                if size not in (name, tile) and size not in tiles and size_value >= tile_value
                and -(-size_value // tile_value) == value}
        if len(ways) > 1:
            shown = ", ".join(f"ceildiv({size}, {tile})" for size, tile in sorted(ways))
            raise Unsupported(None, f"{name}={value} is {shown} at the real sizes: which size it counts the tiles "
                              "of is not known, so it cannot follow the reduced sizes")
        if ways:
            found[name] = ways.pop()
    return found


def _derived_scales(arguments: dict[str, Any], ints: dict[str, int], tiles: dict[str, int]) -> dict[str, tuple[str, ...]]:
    """Float arguments that are exactly one size, or the sum of two, to the power -0.5 at the
    real values (``softmax_scale = (dim + pe_dim) ** -0.5``, computed by the caller): name ->
    those sizes.  Kept at its real value a reduced kernel would scale by the real sizes while
    its reference scales by the reduced ones.  A value several sums give is left alone."""
    sizes = {k: v for k, v in ints.items() if v >= 1 and k not in tiles and not _KEEP.search(k)}
    sums = {(a,): v for a, v in sizes.items()}
    names = sorted(sizes)
    sums.update({(a, b): sizes[a] + sizes[b] for i, a in enumerate(names) for b in names[i + 1:]})
    found: dict[str, tuple[str, ...]] = {}
    for name, value in arguments.items():
        if not isinstance(value, float) or value <= 0:
            continue
        ways = [key for key, total in sums.items()
                if value in (total ** -0.5, 1.0 / math.sqrt(total), 1 / total ** 0.5)]
        if len(ways) == 1:
            found[name] = ways[0]
    return found


def _scaling(build: Callable[[dict], Any], scales: dict[str, tuple[str, ...]],
             real: dict[str, Any]) -> Callable[[dict], Any]:
    """``build`` with each derived scale computed from the int sizes it is built with (the real
    value where a size is symbolic: that scale is then not counted as derived)."""
    def build_with(kwargs: dict[str, Any]) -> Any:
        values = dict(kwargs)
        for name, names in scales.items():
            if all(_is_int(kwargs.get(n)) for n in names) and any(kwargs[n] != real[n] for n in names):
                values[name] = float(sum(kwargs[n] for n in names)) ** -0.5
        return build(values)
    return build_with


def _deriving(build: Callable[[dict], Any], derived: dict[str, tuple[str, str]]) -> Callable[[dict], Any]:
    """``build`` with each derived count computed from the size and tile it is built with."""
    def build_with(kwargs: dict[str, Any]) -> Any:
        counts = {name: (kwargs[size] + kwargs[tile] - 1) // kwargs[tile]
                  for name, (size, tile) in derived.items() if size in kwargs and tile in kwargs}
        return build({**kwargs, **counts})
    return build_with


def _lifted(lift: Callable[[Any, str], Kernel], func: Any, name: str) -> Kernel | None:
    try:
        return lift(func, name) if func is not None else None
    except Unsupported:
        return None


def _degenerate(reduced: Kernel, real: Kernel, loops: bool = False, unrun: bool = True) -> list[str]:
    """On-chip buffers with an axis 1 wide at the reduced sizes and wider in the real build;
    with ``unrun`` or ``loops``, loops and grid axes run never where the real build runs them;
    with ``loops``, also those run once where the real build runs them more often."""
    real_shapes = {buf.name: buf.shape for buf in real.allocs}
    found = []
    for buf in reduced.allocs:
        shape = real_shapes.get(buf.name, ())
        if len(shape) == len(buf.shape) and any(small == Const(1) and isinstance(big, Const) and big.value > 1
                                                 for small, big in zip(buf.shape, shape)):
            found.append(f"{buf.name} is {[str(d) for d in buf.shape]} (real {[str(d) for d in shape]})")
    # a loop or grid axis run once where the real build runs it more often (a fixed size over a
    # tile the factory sets itself: S // 64 chunks): what one iteration leaves for the next is unchecked
    # a loop run never where the real build runs it (``block_N * block_K // (threads * 4)`` chunks is 0
    # at small tiles): nothing in it is checked, and what it would write is read uninitialized
    ours, theirs = _extents(reduced), _extents(real)
    if len(ours) == len(theirs):
        found += [f"the {what} over {var} runs {'never' if small.value == 0 else 'once'} (real {big.value} times)"
                  for (what, var, small), (_, _, big) in zip(ours, theirs)
                  if isinstance(small, Const) and isinstance(big, Const) and big.value > small.value
                  and (small.value == 0 and (unrun or loops) or loops and small.value == 1)]
    return found


def _extents(kernel: Kernel) -> list[tuple[str, str, Any]]:
    """Loop and grid extents in program order: ("loop" | "grid", variable, extent)."""
    from .program import GridLaunch, Loop, walk_stmts
    found = [("grid", axis.var, axis.extent) for axis in kernel.grid]
    for stmt in walk_stmts(kernel.body):
        if isinstance(stmt, Loop):
            found.append(("loop", stmt.var, stmt.extent))
        elif isinstance(stmt, GridLaunch):
            found += [("grid", axis.var, axis.extent) for axis in stmt.axes]
    return found


def _larger(concrete: dict[str, int]) -> list[dict[str, int]]:
    """Fixed reduced sizes made larger: each one alone, then all together."""
    return [{**concrete, name: value * factor} for factor in (2, 3, 4) for name, value in concrete.items()] + \
        [{name: value * factor for name, value in concrete.items()} for factor in (2, 3)] if concrete else []


def _pair_comparisons(reduced: Kernel, real: Kernel, real_values: dict[str, int]) -> tuple[tuple[BinOp, int], ...]:
    """Each comparison of a constant in the reduced build with the case (below, at, above the
    constant) of the same comparison in the real build at the real sizes.  Pairs are aligned by
    operator and constant; a constant that differs between the builds comes from a tile."""
    import difflib

    from .sizes import _at_most, _side_value, comparison_case, constant_comparisons, stage_cycles
    ours, theirs = constant_comparisons(reduced), constant_comparisons(real)

    def key(node: BinOp) -> tuple:
        return (node.op, node.b.value if isinstance(node.b, Const) else node.a.value)
    matcher = difflib.SequenceMatcher(a=[key(n) for n in ours], b=[key(n) for n in theirs], autojunk=False)
    ends = _at_most(real)
    pairs = []
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            case = comparison_case(theirs[block.b + offset], real_values, ends)
            if case is not None:
                pairs.append((ours[block.a + offset], case))
    # a loop over barrier stages reaches at least as far as at the real sizes, up to 2 * stages
    real_cycles = set(stage_cycles(real))
    for var, stages in stage_cycles(reduced):
        if (var, stages) in real_cycles and var in ends:
            try:
                last = _side_value(Var(var), real_values, ends)
            except (KeyError, ZeroDivisionError, TypeError):
                continue
            pairs.append((BinOp(">", Var(var), Const(min(last, 2 * stages) - 1)), 1))
    return tuple(pairs)


def _pair_divisions(reduced: Kernel, real: Kernel) -> tuple[tuple[BinOp, BinOp], ...]:
    from .sizes import division_list
    ours, theirs = division_list(reduced), division_list(real)
    if len(ours) != len(theirs):
        return ()
    return tuple(zip(ours, theirs))

