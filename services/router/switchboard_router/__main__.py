from switchboard import process_env

process_env.prepare()  # before gRPC loads

from switchboard.host import module_main  # noqa: E402

module_main("router")
