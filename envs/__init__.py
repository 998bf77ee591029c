"""Gymnasium environments over CypherTurn sessions (guided and agentic protocols), model backends
and the evaluate CLI. Not built yet: see the project's open issues and DESIGN §6."""
