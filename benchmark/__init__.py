"""The CypherTurn session generator: verified multi-turn sessions over the worlds (``benchmark.build``),
the session format and its row codec (``benchmark.session``), the HF export and the review round-trip.
The metrics, summaries and reports are in ``scoring``."""
