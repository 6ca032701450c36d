"""process_env.prepare() before gRPC loads keeps gRPC's threads out of forked children (the
tool executor forks one per command; a restarted gRPC poller once printed into a command's
output)."""

from __future__ import annotations

import os
import subprocess
import sys

FORK_AFTER_GRPC = """
import asyncio, os, sys, time
if sys.argv[1] == "prepared":
    from switchboard import process_env
    process_env.prepare()
import grpc

async def main() -> None:
    server = grpc.aio.server()
    server.add_insecure_port("127.0.0.1:0")
    await server.start()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        time.sleep(0.3)  # what gRPC's fork handler restarts is running by now
        os.write(write, str(len(os.listdir("/proc/self/task"))).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    print(os.read(read, 16).decode())
    await server.stop(0)

asyncio.run(main())
"""


def child_threads(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run(
        [sys.executable, "-c", FORK_AFTER_GRPC, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


def test_a_forked_child_has_only_its_own_thread() -> None:
    assert child_threads("prepared") == 1


def test_without_it_grpc_restarts_its_threads_in_the_child() -> None:
    """Why prepare() exists: gRPC's default (if this fails, gRPC changed it)."""
    assert child_threads("plain") > 1


THREADS_ALLOCATE = """
import ctypes, sys, threading
if sys.argv[1] == "prepared":
    from switchboard import process_env
    process_env.prepare()
barrier = threading.Barrier(8)
kept = []

def work() -> None:
    kept.append([bytearray(512) for _ in range(2000)])  # malloc'd in this thread's arena
    barrier.wait()  # every thread alive at once: none can take over an exited one's arena

threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()  # glibc: one "Arena N:" block per arena, on stderr
"""


def arenas(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", THREADS_ALLOCATE, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_threads_share_at_most_two_malloc_arenas() -> None:
    assert 1 <= arenas("prepared") <= 2


def test_without_it_each_thread_grows_an_arena_of_its_own() -> None:
    """Why the limit exists: glibc's default (if this fails, the default changed)."""
    assert arenas("plain") > 2
