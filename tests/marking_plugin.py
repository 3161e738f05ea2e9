"""A pytest plugin for tests/test_pipeline.py: puts a (harmless) usefixtures mark on the first
conformance test, as a user's conftest might, so that test takes pytest's own protocol while
the others take the lean one."""


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        if "qc_pair" in getattr(getattr(item, "callspec", None), "params", {}):
            item.add_marker(pytest.mark.usefixtures())
            return
