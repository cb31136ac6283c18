"""Shared pytest configuration: marker registration only."""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running tests")
    config.addinivalue_line("markers", "torch: needs torch installed (real torch.distributed with gloo)")
    config.addinivalue_line("markers", "tilelang: needs tilelang installed")
    config.addinivalue_line("markers", "realcode: needs the real libraries of the realcode extra installed")
