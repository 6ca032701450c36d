from switchboard import process_env

process_env.prepare()  # before anything loads gRPC: the executor tests fork commands

pytest_plugins = ["tests.support.servers"]
