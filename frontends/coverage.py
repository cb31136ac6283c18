"""Distributed constructs of a file that the checked program did not run through.

A file can parallelise a model at module level (``parallelize_module`` on a global, a DDP
wrapper in ``main()``) or call collectives in functions the entry never reaches.  Checking the
entry alone would then say nothing about that code, so a verdict must name those lines and
must not be ``verified``.  Queries and set-up that do not change any value (``get_rank``,
``init_process_group``, ``new_group``...) are not constructs in this sense.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from .source import SourceFile, library_name

# Calls that ask about or set up the world without moving or transforming data.
_NEUTRAL = {
    "dist.get_rank", "dist.get_world_size", "dist.is_initialized", "dist.is_available", "dist.init_process_group",
    "dist.destroy_process_group", "dist.new_group", "dist.get_process_group_ranks", "dist.get_backend",
    "dist.get_global_rank", "dist.get_group_rank", "dist.barrier", "dist.is_gloo_available", "dist.is_nccl_available",
    "dist.ReduceOp", "dist.group",
}
_NEUTRAL_SUFFIXES = ("get_rank", "get_world_size", "get_local_rank", "get_coordinate", "size", "get_group",
                     "initialize_model_parallel", "destroy_model_parallel", "model_parallel_is_initialized")
_WRAPPERS = ("DistributedDataParallel", "FullyShardedDataParallel", "fully_shard", "replicate")


def is_distributed_construct(name: str) -> bool:
    if name in _NEUTRAL or name.startswith("dist.ReduceOp") or name.endswith(_NEUTRAL_SUFFIXES):
        return False
    if name.split(".")[-1] in _WRAPPERS:
        return True
    return name.startswith(("dist.", "dtensor.", "megatron."))


def uncovered_constructs(source: SourceFile, executed_lines: set[int]) -> list[tuple[int | None, str]]:
    """(line, reason) for each distributed call the interpreter never ran, in source order."""
    found: dict[int | None, str] = {}
    for call in m.findall(source.module, m.Call()):
        name = library_name(source, call.func)
        if name is None or not is_distributed_construct(name):
            continue
        line = source.line(call)
        if line in executed_lines or line in found:
            continue
        found[line] = (f"line {line}: {source.code(call.func)}(...) is outside the program that was checked (the "
                       f"entry never reaches it), so nothing was proven about it")
    return sorted(found.items(), key=lambda item: (item[0] is None, item[0] or 0))
