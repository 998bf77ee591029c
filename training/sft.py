"""Supervised fine-tuning on CypherTurn training-world sessions (DESIGN §10).

    accelerate launch training/sft.py --config configs/qwen2.5-3b_sft.yaml
    python training/sft.py --config configs/smoke_sft.yaml --max_steps 2      # any field overridable

The recipe YAML holds ``training.config.CypherTurnSFTArguments``, TRL's ``SFTConfig`` and
``ModelConfig`` fields side by side. The data are oracle conversations in the environment's tool-call
format (guided and/or agentic) and/or the GRPO paper's single-turn format; loss on assistant tokens
(``assistant_only_loss: true`` in the recipes). The output directory is a checkpoint that
``python -m envs.evaluate --model OUTPUT_DIR`` scores as it is.
"""

from training.config import CypherTurnSFTArguments
from training.trainers import run_sft


def make_parser():
    from trl import ModelConfig, SFTConfig, TrlParser

    return TrlParser((CypherTurnSFTArguments, SFTConfig, ModelConfig))


if __name__ == "__main__":
    script_args, training_args, model_args = make_parser().parse_args_and_config()
    run_sft(script_args, training_args, model_args)
