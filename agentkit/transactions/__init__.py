"""Transactional generations and execution intents: the ledger folded from a session's
events (:class:`TransactionLedger`), a generation's transaction and the executions whose
outcome is uncertain after a crash. The Session's transaction steps and the loop's
intents are private.
"""

from __future__ import annotations

from ._ledger import GenerationTransaction, TransactionLedger, UncertainExecution, claim_digest, reserved_problem

__all__ = ["GenerationTransaction", "TransactionLedger", "UncertainExecution", "claim_digest", "reserved_problem"]
