"""The project's error hierarchy (Gymnasium's ``error.py`` is the model): one base class, and one
``InfrastructureError`` for every failure of something the project depends on.

- ``CypherTurnError``: the base of every exception the project raises on purpose, so that a caller can
  catch all of them (``except CypherTurnError``) and nothing else.
- ``InfrastructureError``: Neo4j, a model server or the machine failed (unreachable, restarting, out of
  resources). Never a verdict on a model's answer: retried with backoff, recorded as an infrastructure
  error, and a resumed run replays the turns it cost.
- ``InputError``: bad input from a person or a file (a flag, a spec, a dataset row, a reward spec): a
  clear message naming what is wrong; nothing is lost.
- ``ResetNeeded``: an environment used out of order (``step`` or ``get_reward`` before ``reset``, or
  after the episode ended), as Gymnasium names it: the caller's bug.
- ``InvariantError``: a check the project makes on its own work failed (the oracle's replay of a gold
  query did not score 1): a bug in the project, never bad input nor a failed dependency.

Each class also derives from the builtin it has always been (``RuntimeError`` for infrastructure, order
and invariants, ``ValueError`` for input), so existing ``except`` clauses keep working. Model-written text is never an
exception: a bad query or action is a result (``graphs.executor.QueryError``, ``envs.actions.ParseError``)
that the environment scores.
"""

from __future__ import annotations


class CypherTurnError(Exception):
    """Base class of every error the project raises on purpose."""


class InfrastructureError(CypherTurnError, RuntimeError):
    """A dependency (Neo4j, a model server, the machine) failed: no verdict on the model's answer."""


class InputError(CypherTurnError, ValueError):
    """Bad input from a person or a file: the message names what is wrong."""


class ResetNeeded(CypherTurnError, RuntimeError):
    """An environment was used out of order: ``step`` or ``get_reward`` before ``reset`` (Gymnasium's name)."""


class InvariantError(CypherTurnError, RuntimeError):
    """A check the project makes on its own work failed: a bug to report, not the input's fault."""
