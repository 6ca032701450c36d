"""The A2A server's task store: the SDK's in-memory store, holding at most ``max_tasks`` tasks
(the oldest saved first is forgotten), so that a long-lived gateway does not grow without end."""

from __future__ import annotations

from collections import OrderedDict

from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import Task


class BoundedTaskStore(InMemoryTaskStore):
    def __init__(self, max_tasks: int) -> None:
        super().__init__()
        self.max_tasks = max_tasks
        self._order: OrderedDict[str, ServerCallContext] = OrderedDict()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        if task.id not in self._order:
            self._order[task.id] = context
        while len(self._order) > self.max_tasks:
            oldest, owner = self._order.popitem(last=False)
            await super().delete(oldest, owner)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._order.pop(task_id, None)
        await super().delete(task_id, context)
