"""Sessions: the thread-safe, event-sourced conversation (:class:`~agentkit.Session`), the
pool that shares them between threads (:class:`~agentkit.SessionPool`) and redaction of what
they record (``redact=``).

``Session`` and ``SessionPool`` are imported from ``agentkit``; this package lists the
redaction names. Its private modules are the Session's parts: the event log (and its read
side), the generation gate, its generations, its construction and closing, scheduling,
listeners, following other hosts' commits, front-door conversions of foreign objects.
"""

from __future__ import annotations

from ._redaction import REDACTED, Redaction, Redactor, redactor_of

__all__ = ["REDACTED", "Redaction", "Redactor", "redactor_of"]
