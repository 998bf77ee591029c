"""SFT and GRPO training scripts and data builders. Not built yet: see DESIGN §10."""
