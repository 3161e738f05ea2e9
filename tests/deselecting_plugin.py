"""A pytest plugin for tests/test_pipeline.py: deselects every other pair of conformance tests, as a
selection plugin the suite does not know about would (the guessed plan is then wrong)."""


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for i, item in enumerate(items):
        (drop if "qc_pair" in getattr(getattr(item, "callspec", None), "params", {}) and (i // 2) % 2 else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
