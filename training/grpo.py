"""GRPO in the CypherTurn environment (DESIGN §10).

    accelerate launch training/grpo.py --config configs/qwen2.5-3b_grpo.yaml
    python training/grpo.py --config configs/smoke_grpo.yaml --reward env:1 --reward my_pkg.mod:fn:0.5

``mode: multi_turn``: each rollout is one turn of a training session, acted on through the environment's
five tools against the real Neo4j (``environment_factory``); ``env`` is the turn's EX. ``mode:
single_turn``: the GRPO paper's format on the guided turn prompt, scored by the paper's four rewards and
the execution reward (weights in ``rewards:``). The recipe YAML holds
``training.config.CypherTurnGRPOArguments``, TRL's ``GRPOConfig`` and ``ModelConfig`` fields; the output
directory is a checkpoint that ``python -m envs.evaluate --model OUTPUT_DIR`` scores as it is.
"""

from training.config import CypherTurnGRPOArguments
from training.trainers import run_grpo


def make_parser():
    from trl import GRPOConfig, ModelConfig, TrlParser

    return TrlParser((CypherTurnGRPOArguments, GRPOConfig, ModelConfig))


if __name__ == "__main__":
    script_args, training_args, model_args = make_parser().parse_args_and_config()
    run_grpo(script_args, training_args, model_args)
