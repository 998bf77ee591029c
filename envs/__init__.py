"""Gymnasium environments over CypherTurn sessions (DESIGN §6). Importing ``envs`` registers:

- ``CypherTurn-Guided-v0``: the guided protocol (schema and gold history shown, 3 actions per turn);
- ``CypherTurn-Agentic-v0``: the agentic protocol (schema withheld, shared budget B = T x m);
- ``CypherTurn-AgenticPersistentSchema-v0``, ``CypherTurn-AgenticDisclosedHorizon-v0``,
  ``CypherTurn-AgenticBudgetEncouraging-v0`` (run it at ``budget_multiplier=10``): the three
  variants of the paper's sensitivity ablation.

``gymnasium.make(id, dataset=DIR, budget_multiplier=3, ...)``; without ``dataset`` the default test
build is used (built on demand and cached).
"""

from gymnasium.envs.registration import register

ENV_IDS = {
    "CypherTurn-Guided-v0": {"protocol": "guided"},
    "CypherTurn-Agentic-v0": {"protocol": "agentic"},
    "CypherTurn-AgenticPersistentSchema-v0": {"protocol": "agentic", "variant": "persistent_schema"},
    "CypherTurn-AgenticDisclosedHorizon-v0": {"protocol": "agentic", "variant": "disclosed_horizon"},
    "CypherTurn-AgenticBudgetEncouraging-v0": {"protocol": "agentic", "variant": "budget_encouraging",
                                               "budget_multiplier": 10},
}

for _id, _kwargs in ENV_IDS.items():
    register(id=_id, entry_point="envs.env:CypherTurnEnv", kwargs=_kwargs, disable_env_checker=True)
