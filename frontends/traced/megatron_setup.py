"""What megatron-core's launcher does before a model runs, done on the simulated world.

``initialize_megatron`` seeds the model-parallel RNG tracker (``model_parallel_cuda_manual_seed``)
after ``initialize_model_parallel``; megatron-core's attention, dropout and GPU-side weight
initialisation fork that tracker and raise "cuda rng state model-parallel-rng is not added" when
no launcher seeded it.  Here the tracker is seeded on first use when the code did not seed it (with
the run's seed; the default generator's state is kept, as a launcher seeds before the run draws),
and emptied after each run (the library stays imported, each rank's run seeds its own
``tp_rank``).  The tracker's states are the CPU generator's (``cuda_standin.py``).
"""
from __future__ import annotations

import sys

import torch

TRACKER_MODULE = "megatron.core.tensor_parallel.random"
SEEDED: list[str] = []   # what this run's launcher step did (stated in the report)


def seed_tracker_on_first_fork(random_module) -> None:
    tracker_class = random_module.CudaRNGStatesTracker
    real_fork = getattr(tracker_class.fork, "_unseeded_fork", tracker_class.fork)

    def fork(self, name=random_module._MODEL_PARALLEL_RNG_TRACKER_NAME):
        if not self.states_ and _model_parallel_ready():
            seed = torch.initial_seed()
            state = torch.get_rng_state()
            random_module.model_parallel_cuda_manual_seed(seed)
            torch.set_rng_state(state)
            SEEDED.append(f"megatron-core's RNG tracker seeded as its launcher would "
                          f"(model_parallel_cuda_manual_seed({seed})): the code did not seed it")
        return real_fork(self, name)

    fork._unseeded_fork = real_fork
    tracker_class.fork = fork


def _model_parallel_ready() -> bool:
    state = sys.modules.get("megatron.core.parallel_state")
    return state is not None and state.model_parallel_is_initialized()


def reset() -> None:
    """Forget the tracker's states after a run (the next rank seeds its own)."""
    SEEDED.clear()
    random_module = sys.modules.get(TRACKER_MODULE)
    if random_module is not None and getattr(random_module, "_CUDA_RNG_STATE_TRACKER", None) is not None:
        random_module._CUDA_RNG_STATE_TRACKER.reset()
