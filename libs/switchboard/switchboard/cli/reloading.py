"""``switchboard up`` and changes of the configuration file (docs/config-file.md): with the
services in its process, the launcher watches the file for all of them; with processes, each
service process watches it itself (:func:`switchboard.host.serve_services`) and the launcher
passes SIGHUP on to them."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING

from switchboard import reloads
from switchboard.cli.inprocess import InProcess
from switchboard.cli.supervisor import Supervisor
from switchboard.settings import CommonSettings

if TYPE_CHECKING:  # imported when a file is watched: it loads the settings reference
    from switchboard.configfile.reload import Watcher

log = logging.getLogger(__name__)


class Reloading:
    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.settings = CommonSettings.from_environ(environ)
        self.supervisor: Supervisor | InProcess | None = None
        self.watcher: Watcher | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, supervisor: Supervisor | InProcess) -> None:
        """From now on SIGHUP checks the file (until the services run, it stops the launcher
        as SIGTERM does). Watch the file (SB_CONFIG_FILE, set when the command read one) for
        the services hosted in this process; service processes watch it themselves."""
        self.supervisor = supervisor
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.hangup)
        path = self.settings.config_file
        if path is None or not isinstance(supervisor, InProcess):
            return
        from switchboard.configfile.reload import Watcher

        hosting = [*(i.service.name for i in supervisor.instances), "launcher"]
        watcher = Watcher(
            path, self.environ, self.settings.config_from_file, reloads.apply, hosting
        )
        self.watcher = watcher
        self._task = asyncio.create_task(watcher.run(), name="config-file")

    def hangup(self) -> None:
        """SIGHUP: check the file now (here, or in each service process)."""
        if self.watcher is not None:
            self.watcher.trigger()
        if isinstance(self.supervisor, Supervisor) and self.settings.config_file is not None:
            for name, pid in self.supervisor.pids().items():
                try:
                    os.kill(pid, signal.SIGHUP)
                except ProcessLookupError:  # exited meanwhile: the supervisor restarts it
                    log.info("%s exited before SIGHUP reached it", name)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
