"""Prompt templates of the two protocols (DESIGN §6, the paper's Appendix D.5).

Every turn starts with a *turn prompt* that carries all the context the protocol allows; within a
turn, each action's result comes back as an *observation*. Agents keep their own context only inside
a turn: the next turn prompt replaces it.
"""

from __future__ import annotations

import json
from typing import Any

CURRENT_ROWS = 20  # rows of a current-turn result shown
HISTORY_ROWS = 10  # rows of a prior gold result shown in the guided history
AGENTIC_RESULT_CHARS = 200  # agentic history: EXECUTE results truncated to this many characters
GUIDED_CAP = 3
GRAPH_SEARCH_ROWS = 5  # SEARCH_VALUES <text>: the closest values shown, with their label and property
CURRENT_QUESTION = "Current question"  # what opens the question of the turn in a turn prompt
DEPENDENCY_HINT = ("[Note: This turn builds upon the result of Turn {n}. Use the result shown for Turn {n} "
                   "in the conversation history above.]")

ACTIONS_DOC = """You can take these actions, one per response:
- EXECUTE_CYPHER <query>: run a read-only Cypher query on the graph and see the first 20 rows.
- INSPECT_SCHEMA: see every node label with its typed properties and every relationship type.
- SEARCH_VALUES {"label": "...", "property": "...", "query": "..."}: find up to 10 stored values that match text.
  SEARCH_VALUES <text> (no label or property): the 5 stored values closest to the text, each shown as
  (:Label {property: 'value'}).
- ASK_USER <question>: ask the user a clarifying question.
- SUBMIT_ANSWER <query>: give your final Cypher query for the current question; this ends the turn.
Formats accepted: the plain form above, a tool call such as
<tool_call>{"name": "submit_answer", "arguments": {"query": "MATCH (n) RETURN n.name AS name"}}</tool_call>,
or <reasoning>...</reasoning><answer>CYPHER</answer> (a SUBMIT_ANSWER).
Each action costs one unit. If a turn ends without SUBMIT_ANSWER, your last EXECUTE_CYPHER query of
that turn is taken as the answer."""

# the column-naming rule every gold follows (benchmark.chain.column_rule_violations checks it)
COLUMN_RULE = ("Name every returned column after what it holds: a property under its own name "
               "(`p.title AS title`), an aggregate as function_property (`avg_price`, `sum_budget`) and a "
               "count of entities as `count`. A yes/no answer is a boolean named after its test (`any_protected`, "
               "`all_climate`: whether any / all of them pass a test on that property; `count_above`, "
               "`avg_age_below`: a figure compared with a number) and a percentage of them is `pct_` plus the "
               "property tested (`pct_climate`, unrounded).")
EFFICIENCY = "Prefer to submit your answer efficiently: spend actions only when they help."
ENCOURAGE = ("Use the budget fully: verify your query with EXECUTE_CYPHER and look up exact values with "
             "SEARCH_VALUES before you submit; there is plenty of budget for that.")

SYSTEM_GUIDED = f"""You translate a user's questions about a graph database into Neo4j Cypher, one turn of a
conversation at a time. Later questions refer to earlier results ("those", "them", "their"): your query
must re-derive those results, not paste their values. {COLUMN_RULE}

{ACTIONS_DOC}
You have at most {GUIDED_CAP} actions per turn. The graph schema and the conversation so far (with the
correct result of every earlier turn) are given in each turn."""

SYSTEM_AGENTIC = f"""You translate a user's questions about a graph database into Neo4j Cypher, one turn of a
conversation at a time. Later questions refer to earlier results ("those", "them", "their"): your query
must re-derive those results, not paste their values. {COLUMN_RULE} The schema is not shown: use
INSPECT_SCHEMA.

{ACTIONS_DOC}
All actions of the whole session share one budget; when it runs out, every remaining question goes
unanswered. {{budget_instruction}}"""


def system_prompt(protocol: str, variant: str | None) -> str:
    if protocol == "guided":
        return SYSTEM_GUIDED
    return SYSTEM_AGENTIC.replace("{budget_instruction}", ENCOURAGE if variant == "budget_encouraging" else EFFICIENCY)


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def format_result(columns: list[str], rows: list[list[Any]], limit: int | None, *, truncated: bool = False) -> str:
    """A result as a small table: header, then up to ``limit`` rows (None: all)."""
    shown = rows if limit is None else rows[:limit]
    lines = [" | ".join(columns)] + [" | ".join(_cell(v) for v in row) for row in shown]
    hidden = len(rows) - len(shown)
    if hidden > 0 or truncated:
        lines.append(f"... ({hidden if hidden > 0 else 'more'} more rows not shown)")
    if not rows:
        lines.append("(no rows)")
    return "\n".join(lines)


def guided_history(turns, index: int) -> str:
    """Prior gold utterances with their gold results (10 rows; a CONTRAST turn sees the previous
    result whole)."""
    current = turns[index]
    parts = []
    for t in turns[:index]:
        whole = current.phenomenon == "CONTRAST" and t.index == index - 1
        result = format_result(t.gold_columns, t.gold_rows, None if whole else HISTORY_ROWS)
        parts.append(f"Turn {t.index + 1}\nUser: {t.shown_utterance}\nAssistant: [Query Result]\n{result}")
    return "\n\n".join(parts)


def needs_hint(turn) -> bool:
    """A turn that builds on an earlier turn than the one just before it gets the dependency hint."""
    return turn.depends_on is not None and turn.depends_on < turn.index - 1


def guided_turn_prompt(schema_text: str, turns, index: int) -> str:
    turn = turns[index]
    history = guided_history(turns, index) or "(this is the first question)"
    utterance = turn.shown_utterance
    if needs_hint(turn):
        utterance += " " + DEPENDENCY_HINT.format(n=turn.depends_on + 1)
    return (f"Graph schema:\n{schema_text}\n\nConversation so far:\n{history}\n\n"
            f"{CURRENT_QUESTION} (turn {index + 1}): {utterance}\n\nYou have {GUIDED_CAP} actions for this turn.")


def agentic_turn_prompt(history: list[str], utterance: str, index: int, *, schema_text: str | None,
                        horizon: dict | None) -> str:
    parts = []
    if schema_text:
        parts.append(f"Graph schema (from your INSPECT_SCHEMA):\n{schema_text}")
    parts.append("Conversation so far:\n" + ("\n\n".join(history) if history else "(this is the first question)"))
    if horizon:
        parts.append(f"This session has {horizon['turns']} questions; the budget is {horizon['m']} actions per "
                     f"question on average ({horizon['budget']} in all). {horizon['left']} actions are left; a pace "
                     f"of about {horizon['suggested']} per remaining question uses them evenly.")
    parts.append(f"{CURRENT_QUESTION} (turn {index + 1}): {utterance}")
    return "\n\n".join(parts)


def truncate(text: str, limit: int = AGENTIC_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def error_text(kind: str, message: str) -> str:
    return f"[Error: {kind}] {message}"


def invalid_action(message: str) -> str:
    return f"[Invalid action] {message}"
