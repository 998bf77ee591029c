"""SFT and GRPO of a model on CypherTurn training-world sessions (DESIGN §10), with TRL.

- ``training/sft.py``, ``training/grpo.py``: the command lines (``--config recipe.yaml``, any field
  overridable), thin over ``training.trainers``;
- ``training.config``: the CypherTurn part of a recipe, parsed beside TRL's ``SFTConfig`` / ``GRPOConfig``
  and ``ModelConfig``;
- ``training.data``: SFT conversations (oracle tool calls, the GRPO paper's format, the bare action) and
  GRPO rows built from sessions through the TRL adapter (``envs.trl_adapter``);
- ``training.trainers``: ``run_sft`` / ``run_grpo``, which write a checkpoint that
  ``python -m envs.evaluate --model DIR`` scores as it is.
"""
