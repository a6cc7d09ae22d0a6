"""Transactional generations and execution intents: the ledger folded from a session's
events (:class:`TransactionLedger`), a generation's transaction and the executions whose
outcome is uncertain after a crash, and the calls' journal (steps, the questions tools ask a
person: ``agentkit.InputRequest``). The Session's transaction steps and the loop's
intents are private.
"""

from __future__ import annotations

from ._ledger import GenerationTransaction, TransactionLedger, UncertainExecution, claim_digest, reserved_problem

__all__ = ["GenerationTransaction", "TransactionLedger", "UncertainExecution", "claim_digest", "reserved_problem"]
