"""Reward functions (the GRPO paper's four, execution-based, partial credit) and the plug-in registry.
Not built yet: see the project's open issues and DESIGN §9."""
