"""Root conftest: loads the qconform pytest plugin (suite/plugin.py)."""

pytest_plugins = ["suite.plugin"]
