"""Store wrappers the tests share: real stores that also record how they were called."""

from __future__ import annotations

from agentkit import InMemoryEventStore


class RecordingStore(InMemoryEventStore):
    """A real in-memory store that also keeps each append's batch."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list] = []

    def append(self, session_id, events, *, expected_revision, lease=None):
        self.batches.append(list(events))
        return super().append(session_id, events, expected_revision=expected_revision, lease=lease)
