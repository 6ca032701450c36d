"""The services of embedded mode hosted in the launcher's own process (``switchboard up``
without ``--processes``): the same planned instances as the process supervisor runs, each a
runtime of its own in this event loop, restarted with backoff if it fails."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import IO, TextIO

from switchboard.cli.supervisor import Instance
from switchboard.host import Backoff, Host, Hosted, setup_process
from switchboard.settings import CommonSettings

log = logging.getLogger(__name__)


class InProcess:
    """Start, restart and stop the instances inside this process; their JSON logs go to one
    file (``log_file``), with each line's ``service`` naming who wrote it."""

    def __init__(
        self,
        instances: Sequence[Instance],
        log_file: IO[str],
        *,
        backoff: Backoff | None = None,
        stop_timeout: float = 5.0,
        err: TextIO | None = None,
    ) -> None:
        self.instances = list(instances)
        self.log_file = log_file
        self.stop_timeout = stop_timeout
        self.err = err or sys.stderr
        self.hosted = {i.name: Hosted(i.service, i.env) for i in self.instances}
        self.host = Host(list(self.hosted.values()), restart=True, backoff=backoff, err=self.err)
        self._task: asyncio.Task[None] | None = None
        self._logging: tuple[list[logging.Handler], int] | None = None  # to restore at stop

    def pids(self) -> dict[str, int]:
        return {}  # no processes of their own

    async def start(self) -> None:
        settings = CommonSettings.from_environ(self.instances[0].env)
        root = logging.getLogger()
        self._logging = (root.handlers[:], root.level)
        setup_process("switchboard", settings, self.log_file)
        self._task = asyncio.create_task(self.host.run(), name="in-process-services")

    def restart(self, inst: Instance) -> None:
        """Start one service again, with the instance's (possibly changed) environment."""
        hosted = self.hosted[inst.name]
        hosted.environ = inst.env
        self.host.restart(hosted)

    async def stop(self) -> None:
        """Stop every service; one that does not finish within ``stop_timeout`` is cancelled."""
        self.host.stop()
        if self._task is None:
            return
        done, _ = await asyncio.wait({self._task}, timeout=self.stop_timeout)
        if not done:
            print(
                f"switchboard: services still stopping after {self.stop_timeout:g}s; cancelled",
                file=self.err,
            )
            self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug in the host itself: say so, the launcher goes on stopping
            log.exception("in-process services failed")
        if self._logging is not None:  # the log file closes after this
            root = logging.getLogger()
            root.handlers[:], level = self._logging
            root.setLevel(level)
