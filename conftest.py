pytest_plugins = ["tests.support.servers"]
