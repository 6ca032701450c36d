"""``watch_file`` reads what a sandboxed command may have planted in the agent's workspace: it
follows no symlink at all (inside the workspace or out), reads regular files only (a FIFO
never blocks the scheduler), at most ``SB_SCHEDULER_FETCH_MAX_BYTES``; every refusal is the
job's readable error and nothing of the file is read or published. Outside targets are files
of the test's temporary directory."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from switchboard import beneath
from switchboard.v1 import scheduler_pb2
from switchboard_scheduler.actions import read_beneath
from switchboard_scheduler.errors import ActionFailed
from tests.support.scheduler import fired, scheduler_service

CAP = 1024  # SB_SCHEDULER_FETCH_MAX_BYTES's least value
SECRET = "outside secret 61d0"
TODO = "- water the plants\n"
# A RunNow that blocked on a FIFO would never answer; this long means it did.
RUN_BOUND_S = 60.0


def symlinked(path: str) -> str:
    return f"{path} is or passes through a symbolic link; a watcher follows none"


REFUSED = {
    "link-in.md": symlinked("link-in.md"),  # to notes/todo.md: inside, still not followed
    "notes/escape.md": symlinked("notes/escape.md"),  # to the secret outside
    "linkdir/todo.md": symlinked("linkdir/todo.md"),  # through a directory link (inside)
    "outdir/secret.txt": symlinked("outdir/secret.txt"),  # through one leading out
    "pipe": "pipe is not a regular file; a watcher reads files only",
    "notes": "notes is not a regular file; a watcher reads files only",
    "big.txt": f"big.txt is larger than the {CAP} bytes a watcher reads",
}


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    """``<home>/workspaces/main`` with a regular file and every kind of trap beside it."""
    ws = tmp_path / "workspaces" / "main"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "todo.md").write_text(TODO)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (ws / "link-in.md").symlink_to("notes/todo.md")
    (ws / "notes" / "escape.md").symlink_to(outside / "secret.txt")
    (ws / "linkdir").symlink_to("notes")
    (ws / "outdir").symlink_to(outside)
    os.mkfifo(ws / "pipe")
    (ws / "big.txt").write_bytes(b"x" * (CAP + 1))
    try:
        yield ws
    finally:
        with contextlib.suppress(OSError):  # release a reader that blocked on the FIFO
            os.close(os.open(ws / "pipe", os.O_WRONLY | os.O_NONBLOCK))


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "openat2" and not beneath.openat2_available():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("this kernel has no openat2 (CI=true: must run here)", pytrace=False)
        pytest.skip("this kernel has no openat2 (Linux >= 5.6)")
    beneath.use_resolver(request.param)
    try:
        yield request.param
    finally:
        beneath.use_resolver(None)


def bounded_read(workspace: Path, path: str) -> BaseException | bytes | None:
    """``read_beneath`` in a thread, waited for at most RUN_BOUND_S (then the FIFO is
    released and the test fails): what it returned or raised."""
    outcome: list[BaseException | bytes | None] = []

    def attempt() -> None:
        try:
            outcome.append(read_beneath(workspace, path, CAP))
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=attempt, daemon=True)
    reader.start()
    reader.join(RUN_BOUND_S)
    if reader.is_alive():
        with contextlib.suppress(OSError):
            os.close(os.open(workspace / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        reader.join(RUN_BOUND_S)
        pytest.fail(f"reading {path} blocked")
    return outcome[0]


@pytest.mark.parametrize("path", sorted(REFUSED))
def test_read_beneath_refuses(workspace: Path, resolver: str, path: str) -> None:
    got = bounded_read(workspace, path)
    assert isinstance(got, ActionFailed), got
    assert str(got) == REFUSED[path]


def test_read_beneath_reads_a_regular_file(workspace: Path, resolver: str) -> None:
    assert read_beneath(workspace, "notes/todo.md", CAP) == TODO.encode()
    assert read_beneath(workspace, "notes/todo.md", len(TODO)) == TODO.encode()  # exactly


def test_what_does_not_exist_is_none(workspace: Path, tmp_path: Path, resolver: str) -> None:
    assert read_beneath(workspace, "notes/none.md", CAP) is None
    assert read_beneath(workspace, "none/todo.md", CAP) is None
    assert read_beneath(tmp_path / "workspaces" / "nobody", "notes/todo.md", CAP) is None


def test_the_workspace_itself_may_not_be_a_symlink(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "workspaces" / "alias").symlink_to(workspace)
    with pytest.raises(ActionFailed) as caught:
        read_beneath(tmp_path / "workspaces" / "alias", "notes/todo.md", CAP)
    assert str(caught.value) == "the workspace is not a directory (nor followed if a link)"


async def test_watchers_of_planted_files_fail_readably_and_never_block(
    nats_url: str, database_url: str, tmp_path: Path, workspace: Path
) -> None:
    """Through the real service: each trap is the job's error (the run answers: nothing
    blocked), its digest stays unset (nothing was read), and only the regular file's change
    is ever published."""
    env = {"SB_SCHEDULER_FETCH_MAX_BYTES": str(CAP)}
    async with scheduler_service(nats_url, database_url, tmp_path, **env) as s:
        names = {path: f"w{i}" for i, path in enumerate(sorted(REFUSED))}
        for path, name in [*names.items(), ("notes/todo.md", "todo")]:
            job = scheduler_pb2.Job(name=name, kind="watch_file", path=path, every_ms=3_600_000)
            await s.stub.Add(job)
        for _ in range(2):  # the first look, and a second one that would see a change
            for path, name in names.items():
                request = scheduler_pb2.JobName(name=name)
                try:
                    ran = await s.stub.RunNow(request, timeout=RUN_BOUND_S)
                except grpc.aio.AioRpcError as exc:
                    pytest.fail(f"watching {path} did not answer: {exc.code()}")
                assert ran.error == REFUSED[path], (path, ran.error)
                assert ran.job.content_sha256 == "" and ran.job.last_error == REFUSED[path]
        todo = scheduler_pb2.JobName(name="todo")
        assert (await s.stub.RunNow(todo)).result == "first look"
        (workspace / "notes" / "todo.md").write_text(TODO + "- and the basil\n")
        assert (await s.stub.RunNow(todo)).result == "changed, published"
        [event] = await fired(nats_url)
        assert "notes/todo.md changed" in event.message.text and "basil" in event.message.text
        assert SECRET not in event.message.text
