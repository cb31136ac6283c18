"""Small versions of the benchmark plans: real model sizes, few layers, small meshes."""
from verifier.scale import PLANS, Plan

SMALL: dict[str, dict[str, int | str]] = {
    "llama3-8b": dict(layers=2, dp=4),
    "llama3-70b": dict(layers=4, dp=2, tp=2, pp=2, microbatches=4, chunks=2),
    "llama3-405b": dict(layers=6, dp=2, tp=2, pp=3, microbatches=3),
    "deepseek-moe-16b": dict(layers=3, dp=4, tp=2, pp=2, ep=2, microbatches=2),
    "deepseek-v2-236b": dict(layers=3, dp=4, tp=2, pp=2, ep=2, microbatches=2),
    "deepseek-v3-671b": dict(layers=5, dp=4, tp=2, pp=2, ep=2, microbatches=2),
}


def small(name: str, **override: int | str) -> Plan:
    settings = dict(SMALL[name]) | override
    layers = settings.pop("layers")
    return PLANS[name].small(layers, **settings)
