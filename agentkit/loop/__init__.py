"""The step loop (private): infer, commit, run tools, commit, repeat; structured output
and its retries; the generation tools (``set_plan``, ...). Nothing here is public: the
front doors (``agentkit.run_agent``, ``agentkit.Agent``, ``agentkit.Session``) run it."""

from __future__ import annotations
