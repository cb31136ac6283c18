"""Small source files and IR answers shared by the agent tests (line numbers matter: see comments)."""
from __future__ import annotations

import json
from pathlib import Path

from agent.ir_json import program_to_json
from verifier.text_format import parse_program

# Line 17 is the all-reduce; forward starts on line 12.
ROW_OK = '''"""Row-parallel projection."""
import torch
import torch.distributed as dist

N, D = 4, 8


def example_inputs():
    return torch.randn(N, D), torch.randn(D, D)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    x_local = x.chunk(world, dim=1)[rank]
    w_local = w.chunk(world, dim=0)[rank]
    y = x_local @ w_local
    dist.all_reduce(y)
    return y
'''

# The same code with the all-reduce forgotten: a real bug (line 17 is now `return y`).
ROW_MISSING = ROW_OK.replace("    dist.all_reduce(y)\n", "")

_HEAD = """mesh tp=2
dim N=4, D=8
input x: f32[N, D] {tp: R} at 12
input w: f32[D, D] {tp: R} at 12
x_local = local_chunk(x, mesh_dim=tp, dim=1) at 14
w_local = local_chunk(w, mesh_dim=tp, dim=0) at 15
y = matmul(x_local, w_local) at 16
"""

IR_OK = _HEAD + """y_sum = all_reduce(y, mesh_dim=tp, op=sum) at 17
output y_sum {tp: R}
"""

# Cites the matmul's line for the all-reduce and invents an all-gather on the return line.
IR_WRONG_LINES = _HEAD + """y_sum = all_reduce(y, mesh_dim=tp, op=sum) at 16
z = all_gather(y_sum, mesh_dim=tp, dim=0) at 18
output z {tp: R}
"""

# For ROW_MISSING: the faithful IR (no all-reduce) ...
IR_MISSING = _HEAD + """output y {tp: R}
"""

# ... and the laundering attempt: an all-reduce the source does not have, on the return line.
IR_LAUNDERED = _HEAD + """y_sum = all_reduce(y, mesh_dim=tp, op=sum) at 17
output y_sum {tp: R}
"""

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llm" / "tp_function_table.py"


def as_json(vir: str) -> str:
    """An answer as an endpoint with structured output returns it."""
    return json.dumps(program_to_json(parse_program(vir)))


def write(tmp_path: Path, text: str, name: str = "model.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)
