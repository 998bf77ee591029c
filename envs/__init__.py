"""Gymnasium environments over CypherTurn sessions (DESIGN §6). Importing ``envs`` registers:

- ``CypherTurn-Guided-v0``: the guided protocol (schema and gold history shown, 3 actions per turn);
- ``CypherTurn-Agentic-v0``: the agentic protocol (schema withheld, shared budget B = T x m);
- ``CypherTurn-AgenticPersistentSchema-v0``, ``CypherTurn-AgenticDisclosedHorizon-v0``,
  ``CypherTurn-AgenticBudgetEncouraging-v0`` (at ``budget_multiplier=10``): the three variants of the
  paper's sensitivity ablation.

``gymnasium.make(id, dataset=DIR)`` plays the id's settings (``ENV_IDS``: the ``EnvConfig`` fields it
sets); other settings come as ``config=EnvConfig(...)`` of the id's protocol and variant
(``envs.env.make_registered``). Without ``dataset`` the default test build is used (built on demand
and cached).
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

for _id, _preset in ENV_IDS.items():
    register(id=_id, entry_point="envs.env:make_registered", kwargs={"preset": _preset}, disable_env_checker=True)
