"""Scale: verify whole training plans (Llama-3 405B, DeepSeek-V3 671B) in seconds.

``check_plan(PLANS["llama3-405b"])`` proves the unrolled training step of a plan — every
layer's forward and backward on its pipeline stage for every microbatch, the pipeline
schedule, the tensor-, expert- and data-parallel gradient synchronisation, and so the
gradients the optimizer consumes — equivalent to the same step on one device, without
ever building the unrolled program.  The cost grows with the number of *distinct*
blocks, not with tensor sizes, and linearly (bookkeeping) with layers, microbatches and
ranks.  Modules: ``plans.py`` (plans, the lazy unrolled step), ``blocks.py`` (the IR of
each block and of the sync stand-ins), ``symmetry.py`` (coordinate classes),
``canonical.py`` (structural hashing), ``reduce.py`` (real and reduced sizes),
``solve.py`` (one proof, in a pool worker), ``check.py`` (the walk), ``faults.py``
(seeded bugs), ``materialise.py`` (the unrolled step of a small dense plan as one
program, to cross-check the argument below).

Why the parts prove the whole
-----------------------------
The unrolled step is a composition of block instances (``plans.py``): the embedding, per
layer an attention block and an MLP block (MoE layers: a router and shared-expert block
and a routed-experts block), the head; each runs once per microbatch; then one
synchronisation per parameter gradient.  Each block is an IR program over the mesh dims
its collectives use (``tp``; ``ep x tp`` for routed experts; ``dp [x ep]`` for a
data-parallel sync), with the plan's real sizes as bound symbolic dims.

1. Compositionality (cut points).  A block is checked as a function of its boundary
   inputs placed as the contract says — the residual stream of one sequence, ``[S, H]``
   sharded along the sequence over ``tp`` (``S(0)``) — and of its own parameters: for all
   values of those inputs, its outputs re-assembled from the ranks equal the
   single-device block's outputs and have the contracted placement, and its generated
   backward, for all output cotangents placed like the outputs, gives input and
   parameter gradients equal to the single-device VJP (parameter gradients after the
   block's tensor-parallel sync: sequence-parallel norm weights, the router, MLA's
   down-projections, expert weights over ``tp``).  By induction over the blocks in program
   order the forward of the stack equals the single-device stack (block ``i+1`` receives
   a correctly placed correct value, and its proof holds for *all* such values — the
   cut-point argument of ``verifier/equivalence.py`` applied at block boundaries); by
   induction in reverse order so do the cotangents, hence every parameter gradient (a
   value read by two blocks gets the sum of their input gradients; both are placed
   alike, so the sum is).  The walk checks that every block takes the residual stream
   with the real shape and placement the previous block gives it, also across pipeline
   stage boundaries, where the pipeline moves it unchanged to the ranks with the same
   ``dp``/``ep``/``tp`` coordinates of the next stage; that those sends and receives
   match, in order, without deadlock, is the schedule check.
2. Canonical forms (``canonical.py``).  Two instances with the same canonical form (ops,
   attributes, shapes, placements, mesh, dims; value names and lines canonicalised) are
   the same program up to renaming, so one proof covers both.  Proofs are keyed by the
   form without dim values (the reduced sizes, and so the proof, are a function of it);
   divisibility and shapes at the real sizes are checked per form with values.  All 126
   attention blocks of Llama-3 405B share one proof; a bug seeded in layer 97 gives
   layer 97 a form of its own, proven (or refuted) separately.
3. Microbatches are the same program on other data: a proof for all inputs covers each;
   the schedule check covers their order, and their sum is the gradient accumulation
   (each microbatch's loss is divided by the microbatch count — in the checked head
   block and in the sync stand-ins).
4. Rank symmetry (``symmetry.py``).  Ranks that differ only in coordinates a program does
   not read run the same op list, each on its own data; a program reads a coordinate only
   through ``when=``, ``rank()`` and ``peer=``.  A block is proven on all ranks of its own
   mesh at their real sizes (so rank-dependent code inside it — the masking of a
   vocab-parallel embedding, a ``when="tp == 0"`` — is covered exactly), and that proof
   holds for every copy of the group over the other dims.  What breaks the symmetry:
   * pipeline position — stages run other layers, the first also the embedding, the last
     the head and loss: separate blocks, assigned to their stages, schedule checked per
     stage;
   * the layer kind — dense vs MoE layers, MLA vs GQA: other forms, other classes;
   * code reading an outer coordinate (``when="not (dp == 63)"`` in a tensor-parallel
     block, ``rank(mesh_dim=dp)``): the predicates are evaluated for every value of the
     dims read, the ranks split into coordinate classes, each proven with its own
     specialised program (the odd group gets its own proof, the others share the usual
     one).  A collective over a dim outside the block's mesh is rejected, never split;
   * the data-parallel dims.  A block is proven per data-parallel replica (one
     sequence); replicas are combined only by the gradient sync.  Each sync is checked
     on a stand-in (``blocks.grad_sync``): a loss linear in the parameter and in free
     per-token features, tokens split over ``dp`` (and ``ep``) as the plan splits them,
     normalised like the plan's head (token mean, divided by the microbatch count),
     experts reached through the same ``all_to_all``; its backward section is the plan's
     real sync.  This relies on the loss being a mean of per-token terms and blocks
     treating sequences independently (attention is within a sequence, MoE routing per
     token): then the gradient of the global mean loss is a fixed linear combination of
     the replicas' local gradients, the same for every per-token loss, and the stand-in
     has those local gradients as free variables;
   * the *size* of a data-parallel dim.  It enters a program through collectives over the
     dim and through ``world_size``/``dp_size``.  A constant written where ``1/world``
     belongs is wrong at every size > 1 (the single-device reference runs it too), but a
     program may combine the size non-linearly (``world * world / 2`` is right at 2
     only) and no check at one or two small sizes excludes that.  So syncs are checked at
     the real sizes (``dp=512`` for Llama-3 8B): they are small (a parameter of a few
     elements per rank), the cost is linear in the size for all-reduce and quadratic for
     ZeRO's reduce-scatter (every rank holds a gradient divisible by the size), and a
     scaling bug cannot hide.  Tensor- and expert-parallel groups are simulated at their
     real sizes as well.

Left out, and said so: which experts a token chooses and expert capacity (the gate is an
uninterpreted row-wise function of the router logits, so any top-k rule is covered;
every token goes to every expert, weighted zero where not chosen: the same values, more
traffic, no dropping); experts are not tensor-parallel (each ``tp`` rank dispatches its
own sequence shard, expert weights replicated over ``tp``); MLA's decoupled RoPE key and
rotary embeddings in general; micro-batch size 1; the optimizer's arithmetic (we prove
its inputs); low-precision numerics (the proof is over the reals); that the head's loss
normalisation matches the one the stand-ins assume is by construction (both come from the
plan), not checked.
"""
from .check import check_plan
from .plans import PLANS, Plan, TrainingProgram

__all__ = ["check_plan", "PLANS", "Plan", "TrainingProgram"]
