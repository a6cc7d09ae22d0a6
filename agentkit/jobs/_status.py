"""Pure logic: fold job runtime events into one current summary per running job.

The default projection hides ``job-output`` chunks; while jobs run, the model instead sees
one status message, recomputed before each inference, listing each running job with the
tail of its output so far. Finished jobs are reported by their ``job-finished`` /
``job-failed`` / ``job-aborted`` / ``job-lost`` events, which carry their own output tail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from ..events import RuntimeEvent
from ..messages import Message, TextPart

__all__ = ["RunningJobs"]

_TAIL_CHARS = 2000
_TERMINAL = frozenset({"job-finished", "job-failed", "job-aborted", "job-lost"})


@dataclass
class _Job:
    command: object
    tail: str = ""
    output_chars: int = 0


class RunningJobs:
    """Running jobs as told by runtime events. O(1) per event (output tails are bounded)."""

    __slots__ = ("_jobs",)

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def copy(self) -> RunningJobs:
        """An independent copy."""
        new = RunningJobs()
        new._jobs = {eid: replace(job) for eid, job in self._jobs.items()}
        return new

    def observe(self, event: RuntimeEvent) -> None:
        """Update from one runtime event (non-job events are ignored)."""
        kind = event.runtime_type
        if not kind.startswith("job-"):
            return
        eid = event.data.get("execution_id")
        if not isinstance(eid, str):
            return
        if kind == "job-started":
            self._jobs[eid] = _Job(command=event.data.get("command"))
        elif kind == "job-output":
            job = self._jobs.get(eid)
            chunk = event.data.get("chunk")
            if job is None or not isinstance(chunk, str):
                return
            job.output_chars += len(chunk)
            job.tail = (job.tail + chunk)[-_TAIL_CHARS:]
        elif kind in _TERMINAL:
            self._jobs.pop(eid, None)

    def status_message(self) -> Message:
        """One user message summarising every running job."""
        jobs = [
            {
                "execution_id": eid,
                "command": job.command,
                "output_chars": job.output_chars,
                "output_tail": job.tail,
            }
            for eid, job in self._jobs.items()
        ]
        payload = json.dumps(jobs, ensure_ascii=False)
        text = (
            "<running-jobs note=\"background jobs still running as of this request; "
            f"output_tail is the end of their output so far\">{payload}</running-jobs>"
        )
        return Message(role="user", content=(TextPart(text=text),))
