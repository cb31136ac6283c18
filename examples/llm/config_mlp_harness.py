import torch


def harness(module, world):
    config = module.MLPConfig(hidden=16, ffn=32)
    return module.ParallelMLP(config), (torch.randn(8, 16),)
