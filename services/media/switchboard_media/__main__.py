from switchboard.process_env import run_service

run_service("media")
