"""Training data (DESIGN §10): SFT conversations and GRPO rows built from training-world sessions.

- Tool-calling format (``guided_tools``, ``agentic_tools``): the oracle plays each turn through the TRL
  adapter, calling the environment's tools as GRPO's ``environment_factory`` exposes them.
- The GRPO paper's single-turn format (``paper``): the guided turn prompt (schema, conversation so far,
  question) answered with ``<reasoning><key_value>…</key_value><relationship>…</relationship></reasoning>
  <answer>CYPHER</answer>``, key-values and triples taken from the generator, not parsed from text. The
  environment's grammar reads that response as a SUBMIT_ANSWER, so such a model is scored as is.
- The action format (``guided_action``, the CPU recipe's): the guided turn prompt answered with the action
  in the environment's plain grammar, ``SUBMIT_ANSWER <gold>``; a name the user typed as the graph does not
  store it is first looked up with ``SEARCH_VALUES`` (one row per action, ``action_conversations``); with path
  probes, an answer that walks from a named node is preceded by an ``EXECUTE_CYPHER`` that lists the
  relationship types leading there (``path_probe``), and copies one (``probed_answer``).

``oracle_tool_conversation`` plays one training row with the oracle through the TRL adapter itself,
so every tool result in the conversation is the real one from Neo4j; the conversation is in the
``messages`` format of ``tokenizer.apply_chat_template`` (assistant ``tool_calls``, ``tool`` messages),
ready for SFT with the same tool schemas GRPO shows (``envs.trl_adapter.tool_schemas`` / ``env_tools``).

The oracle reads the gold from the sessions it is given, never from the environment: guided,
EXECUTE_CYPHER then SUBMIT_ANSWER of the gold (``verify=False``: SUBMIT only); agentic,
INSPECT_SCHEMA then SUBMIT_ANSWER.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from benchmark.session import Session
from cypherturn.errors import InvariantError
from envs.env import EnvConfig
from envs.prompts import CURRENT_QUESTION, GUIDED_CAP
from envs.trl_adapter import CypherTurnToolEnv, make_training_rows, tool_schemas
from graphs.cypher_syntax import CypherParseError, bracket_pairs, string_literal, tokenize
from training.config import RecipeError

FINAL_MESSAGE = "I have submitted my answer."


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def turn_prompt(env: CypherTurnToolEnv, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's prompt messages with the turn prompt that ``env.reset(**row)`` returns appended to the last
    one, exactly as ``GRPOTrainer`` merges them (the episode is left started at the row's turn)."""
    observation = env.reset(**row)
    messages = [dict(m) for m in row["prompt"]]
    if observation is not None:
        messages[-1]["content"] = messages[-1]["content"] + observation
    return messages


def oracle_tool_conversation(env: CypherTurnToolEnv, row: dict[str, Any], sessions: dict[str, Session] | list[Session],
                             *, verify: bool = True) -> list[dict[str, Any]]:
    """The oracle's conversation for one training row: the row's prompt with the turn prompt from
    ``env.reset(**row)``, then assistant tool calls and the tool results the environment returned,
    then a short final assistant message. Raises if the oracle's answer does not score EX 1."""
    by_id = sessions if isinstance(sessions, dict) else {s.id: s for s in sessions}
    gold = by_id[row["session"]].turns[int(row["turn"])].gold_cypher
    messages = turn_prompt(env, row)
    plan: list[tuple[str, dict[str, Any]]] = []
    if row.get("protocol", "guided") == "agentic":
        plan.append(("inspect_schema", {}))
    elif verify:
        plan.append(("execute_cypher", {"query": gold}))
    plan.append(("submit_answer", {"query": gold}))
    for name, arguments in plan:
        result = getattr(env, name)(**arguments)
        messages.append({"role": "assistant", "content": "", "tool_calls": [_call(name, arguments)]})
        messages.append({"role": "tool", "name": name, "content": result})
    reward = env.get_reward()
    if reward != 1.0:
        raise InvariantError(f"oracle scored {reward} on {row['session']} turn {row['turn']}")
    messages.append({"role": "assistant", "content": FINAL_MESSAGE})
    return messages


def oracle_tool_conversations(sessions: list[Session], protocol: str = "guided", *,
                              env: CypherTurnToolEnv | None = None, turns: Iterable[int] | None = None,
                              verify: bool = True) -> list[dict[str, Any]]:
    """``{"messages": …, "session": …, "turn": …}`` for every row of ``make_training_rows``."""
    env = env or CypherTurnToolEnv(sessions=sessions, config=EnvConfig(protocol=protocol))
    by_id = {s.id: s for s in sessions}
    out = []
    for row in make_training_rows(sessions, protocol, turns=turns):
        out.append({"messages": oracle_tool_conversation(env, row, by_id, verify=verify),
                    "session": row["session"], "turn": row["turn"]})
    return out


# -- flat messages (what a datasets.Dataset can hold) and the paper's single-turn format ----------------
def chat_template_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """An assistant tool call as the Qwen2.5/Hermes chat template renders it (``tool_calls`` become this
    text, so a conversation stored in Arrow needs no per-tool argument structs): what the model learns to
    write, which TRL parses back into the call in GRPO rollouts and ``envs.actions.parse_action`` reads as
    that call's action in evaluation. Not ``envs.actions.tool_call_text``, the environment's canonical
    one-line form with ``<`` escaped, which no model is shown."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def flat_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """``role`` / ``content`` messages only: assistant ``tool_calls`` as their rendered text, tool results
    as ``tool`` messages. The chat template renders them to the same tokens as the structured form."""
    out = []
    for m in messages:
        content = m.get("content") or ""
        calls = m.get("tool_calls") or []
        if calls:
            parts = [content] if content else []
            parts += [chat_template_tool_call(c["function"]["name"], c["function"]["arguments"]) for c in calls]
            content = "\n".join(parts)
        out.append({"role": m["role"], "content": content})
    return out


def _kv_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def paper_response(turn) -> str:
    """The GRPO paper's tagged response for a turn, from the generator's own gold key-values and triples
    (``none`` for an empty set): ``<reasoning><key_value>…</key_value><relationship>…</relationship>
    </reasoning><answer>GOLD</answer>``; ``rewards.paper`` scores it +1 on all four rewards."""
    kvs = "\n".join(f"{kv['label']}.{kv['property']} = {_kv_value(kv['value'])}" for kv in turn.gold_key_values)
    triples = "\n".join(turn.gold_triples)
    return (f"<reasoning>\n<key_value>\n{kvs or 'none'}\n</key_value>\n<relationship>\n{triples or 'none'}\n"
            f"</relationship>\n</reasoning>\n<answer>\n{turn.gold_cypher}\n</answer>")


def paper_conversation(env: CypherTurnToolEnv, row: dict[str, Any], turn) -> list[dict[str, str]]:
    """The row's prompt with its turn prompt (from ``env.reset``) and the paper's response as the answer."""
    return turn_prompt(env, row) + [{"role": "assistant", "content": paper_response(turn)}]


# the generator's variables: n<step>, and a_/m_/e_n<step> for an anchor, a middle node, an edge
_GENERATED_VARIABLE = re.compile(r"((?:[a-z]_)?n)(\d+)\Z")


def canonical_variables(cypher: str) -> str:
    """``cypher`` with the generator's variable numbers renumbered by first appearance (``a_n75``, ``n75``
    -> ``a_n1``, ``n1``); the same query otherwise (strings, property keys and other names untouched). The
    numbers are the generator's step ids, which no prompt shows: a model taught them learns noise, and at
    inference it invents a name per clause that the next clause does not use."""
    numbers: dict[str, str] = {}
    out, last = [], 0
    tokens = tokenize(cypher)
    for i, tok in enumerate(tokens):
        m = _GENERATED_VARIABLE.match(tok.text) if tok.kind == "word" else None
        if m is None or (i and tokens[i - 1].text == "."):  # a property key, not a variable
            continue
        number = numbers.setdefault(m.group(2), str(len(numbers) + 1))
        out.append(cypher[last:tok.start] + m.group(1) + number)
        last = tok.end
    return "".join(out) + cypher[last:]


_BRACKETS = frozenset("()[]{}")
_LONE_NODE = re.compile(r"(MATCH \((\w+):(\w+))\)\Z")  # a MATCH line that is one node with a label, no map


def inline_string_filters(cypher: str) -> str:
    """``cypher`` with each ``v.property = 'text'`` test of a ``WHERE`` line that directly follows a one-node
    ``MATCH (v:Label)`` line moved into that node's pattern: ``MATCH (n1:Ward)`` / ``WHERE n1.ward_type =
    'general'`` -> ``MATCH (n1:Ward {ward_type: 'general'})``. The same query (a pattern's map is an equality
    test of the node it matches); the pattern is what a graph-wide SEARCH_VALUES shows for a stored value,
    ``(:Ward {ward_type: 'general'})``, so the answer copies it. Only a WHERE that is a plain conjunction (no
    OR, XOR, NOT or brackets) is touched; the other tests stay in it, and a WHERE left empty goes."""
    lines = cypher.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        node = _LONE_NODE.match(lines[i])
        where = lines[i + 1] if node and i + 1 < len(lines) and lines[i + 1].startswith("WHERE ") else None
        moved, kept = _split_string_tests(where[len("WHERE "):], node.group(2)) if where else ([], [])
        if not moved:
            out.append(lines[i])
            i += 1
            continue
        out.append(f"{node.group(1)} {{{', '.join(moved)}}})")
        if kept:
            out.append("WHERE " + " AND ".join(kept))
        i += 2
    return "\n".join(out)


def _split_string_tests(condition: str, variable: str) -> tuple[list[str], list[str]]:
    """The conjuncts of ``condition`` that test ``variable.property = 'text'``, as map entries
    (``property: 'text'``), and the other conjuncts as written; ``([], [])`` where it is not a plain
    conjunction."""
    tokens = tokenize(condition)
    if any(t.upper in ("OR", "XOR", "NOT") or (t.kind == "punct" and t.text in _BRACKETS) for t in tokens):
        return [], []
    conjuncts, start = [], 0
    for t in tokens:
        if t.upper == "AND":
            conjuncts.append(condition[start:t.start].strip())
            start = t.end
    conjuncts.append(condition[start:].strip())
    moved, kept, seen = [], [], set()
    for text in conjuncts:
        parts = tokenize(text)
        if len(parts) == 5 and parts[0].text == variable and parts[1].text == "." and parts[2].kind == "word" \
                and parts[3].text == "=" and parts[4].kind == "string" and parts[2].text not in seen:
            seen.add(parts[2].text)
            moved.append(f"{parts[2].text}: {parts[4].text}")
        else:
            kept.append(text)
    return moved, kept


_ANCHOR_VARIABLE = re.compile(r"a_n\d+\Z")
_ANSWER_VARIABLE = re.compile(r"n\d+\Z")


def answer_first_paths(cypher: str) -> str:
    """``cypher`` with each ``MATCH`` line that is one path from the generator's anchor (``a_nK``, the node a
    name picks out) to the answer node (``nK``) written the other way round, from the answer:
    ``MATCH (a_n1:Genre {name: 'Noir'})<-[:IN_GENRE]-(m_n1:Film)-[:PRODUCED_BY]->(n1:Studio)`` ->
    ``MATCH (n1:Studio)<-[:PRODUCED_BY]-(m_n1:Film)-[:IN_GENRE]->(a_n1:Genre {name: 'Noir'})``. The same
    pattern (each relationship keeps its direction); it starts with the label the question asks about
    ("which studios …"), as a property-filter opening does, ``MATCH (n1:Studio {…})``, so the answer's first
    choice is the same in both and the looked-up node comes last. Other lines are left as they are."""
    return "\n".join(_answer_first(line) for line in cypher.split("\n"))


def _chain(line: str) -> tuple[list[str], list[str]] | None:
    """A ``MATCH`` line that is one plain chain of node, relationship, node, ... as its node texts and the
    relationship texts between them (as written); None for any other line (a comma, a WHERE, a function)."""
    if not line.startswith("MATCH ("):
        return None
    tokens = tokenize(line)
    try:
        pairs = bracket_pairs(tokens)
    except CypherParseError:
        return None
    nodes, links, i = [], [], 1
    while i < len(tokens):
        if tokens[i].text != "(" or tokens[i].kind != "punct":
            return None
        j = pairs[i]
        nodes.append(line[tokens[i].start:tokens[j].end])
        i = j + 1
        if i == len(tokens):
            break
        k = i
        while k < len(tokens) and not (tokens[k].kind == "punct" and tokens[k].text == "("):
            k = pairs[k] + 1 if tokens[k].kind == "punct" and tokens[k].text == "[" else k + 1
        link = line[tokens[i].start:tokens[k - 1].end] if k > i else ""
        if k == len(tokens) or not re.fullmatch(r"<?-(\[.*\])?->?", link, re.S):
            return None
        links.append(link)
        i = k
    return nodes, links


def _answer_first(line: str) -> str:
    if not line.startswith("MATCH (a_n"):
        return line
    chain = _chain(line)
    if chain is None:
        return line
    nodes, links = chain
    if len(nodes) < 2 or not _ANCHOR_VARIABLE.match(_node_variable(nodes[0])) \
            or not _ANSWER_VARIABLE.match(_node_variable(nodes[-1])):
        return line
    out = [nodes[-1]]
    for node, link in zip(reversed(nodes[:-1]), reversed(links)):
        out += [_reversed_link(link), node]
    return "MATCH " + "".join(out)


def _node_variable(node: str) -> str:
    m = re.match(r"\((\w*)", node)
    return m.group(1) if m else ""


def _reversed_link(link: str) -> str:
    """A relationship pattern as written from its other end: ``<-[:R]-`` <-> ``-[:R]->``; undirected stays."""
    body = link[1:] if link.startswith("<") else link
    body = body[:-1] if body.endswith(">") else body
    return ("<" if link.endswith(">") else "") + body + (">" if link.startswith("<") else "")


# path probes (the SFT option path_probes): a small model reads a relationship off the schema badly (the main
# error of runs/demo27: 18% of held-out answers walked the gold's relationships), so before a turn whose answer
# walks from a named node it asks the graph which relationship types lead there, and copies one. On runs/demo27's
# 58 held-out relationship openings the gold's types were among the probe's rows every time, and the only row of
# their length 56 times. runs/demo28 (one SFT leg with it): the probe was learnt (9 of 11 held-out openings wrote
# the gold's), the choice of row was not (3 of 9 answers walked the gold's); not in the CPU recipe.
PROBE_HOPS = 2


def _node_label(node: str) -> str:
    m = re.match(r"\(\w*:(\w+)", node)
    return m.group(1) if m else ""


def _probed_chain(cypher: str) -> tuple[list[str], list[str]] | None:
    """The answer-first chain of ``cypher``'s first line (``answer_first_paths``) when it is one a path probe
    serves: from the answer node (``nK``, a label) through unnamed ``m_`` nodes to a named anchor (``a_nK`` with
    its properties written in the pattern), 1 to ``PROBE_HOPS`` relationships of one type each."""
    chain = _chain(_answer_first(cypher.split("\n", 1)[0]))
    if chain is None:
        return None
    nodes, links = chain
    if not 1 <= len(links) <= PROBE_HOPS or not _ANSWER_VARIABLE.match(_node_variable(nodes[0])) \
            or not _ANCHOR_VARIABLE.match(_node_variable(nodes[-1])) or "{" not in nodes[-1] \
            or not _node_label(nodes[0]) or not _node_label(nodes[-1]):
        return None
    if not all(re.fullmatch(r"<?-\[:\w+\]->?", link) for link in links) \
            or not all(re.fullmatch(r"\(m_\w+:\w+\)", node) for node in nodes[1:-1]):
        return None
    return nodes, links


def path_probe(cypher: str) -> str | None:
    """The EXECUTE_CYPHER query a path probe runs before answering ``cypher`` (the gold), or None where its
    first line is no path from a named node (``_probed_chain``): every distinct sequence of relationship types
    on the paths of at most ``PROBE_HOPS`` from the answer's label to that node, each type after a colon as a
    pattern writes it (``[":DEPLOYED_ON", ":OWNS"]``, so that a schema renaming renames it too)."""
    chain = _probed_chain(cypher)
    if chain is None:
        return None
    nodes, _ = chain
    anchor = "(" + nodes[-1][1 + len(_node_variable(nodes[-1])):]  # the named node, without its variable
    return (f"MATCH p = (:{_node_label(nodes[0])})-[*..{PROBE_HOPS}]-{anchor}\n"
            f"RETURN DISTINCT [x IN relationships(p) | ':' + type(x)] AS path")


def probed_answer(cypher: str) -> str:
    """``cypher`` with its first line written as a path probe's row reads: from the answer node, the
    relationship types in the probe's order, undirected, the unnamed nodes between without their labels
    (``MATCH (n1:Cluster)-[:DEPLOYED_ON]-(m_n1)-[:OWNS]-(a_n1:Squad {name: 'Team Raegomaend'})``), so the
    answer copies the row. A relationship between two nodes of one label keeps its direction (the probe
    cannot tell which way a film is inspired by a film). ``cypher`` as it is where no probe serves it.
    The caller checks that the result is the gold's (``action_conversations``)."""
    chain = _probed_chain(cypher)
    if chain is None:
        return cypher
    nodes, links = chain
    labels = [_node_label(n) for n in nodes]
    out = [nodes[0]]
    for i, link in enumerate(links):
        if labels[i] != labels[i + 1]:
            link = "-" + link.strip("<>-") + "-"
        node = nodes[i + 1]
        out += [link, node if i + 1 == len(nodes) - 1 else f"({_node_variable(node)})"]
    rest = cypher.split("\n", 1)[1:]
    return "\n".join(["MATCH " + "".join(out)] + rest)


def answer_query(turn, inline_filters: bool = False, answer_first: bool = False, probed: bool = False) -> str:
    """The turn's gold as the recipe answers it: its variables numbered by first appearance
    (``canonical_variables``), with ``inline_filters`` its string tests written in the node pattern
    (``inline_string_filters``) and with ``answer_first`` its anchored paths written from the answer node
    (``answer_first_paths``), with ``probed`` its first path as a path probe's row reads (``probed_answer``)."""
    gold = inline_string_filters(turn.gold_cypher) if inline_filters else turn.gold_cypher
    gold = answer_first_paths(gold) if answer_first else gold
    gold = probed_answer(gold) if probed else gold
    return canonical_variables(gold)


def action_response(turn, inline_filters: bool = False, answer_first: bool = False, probed: bool = False) -> str:
    """The guided turn answered with the action alone, in the environment's plain grammar:
    ``SUBMIT_ANSWER <gold>``, the gold in the form ``answer_query`` writes. About half the paper response's
    tokens, and one action per turn to score."""
    return f"SUBMIT_ANSWER {answer_query(turn, inline_filters, answer_first, probed)}"


def recall_query(session: Session, index: int, inline_filters: bool = False, answer_first: bool = False
                 ) -> str | None:
    """The answer (``answer_query``) of the turn whose set turn ``index`` builds on (``Session.set_turn``);
    None for an opening or a topic shift. A small model that answers a follow-up writes the earlier set again
    and leaves the new step out (runs/demo30: 1 of 33 first follow-ups right); run first, as EXECUTE_CYPHER, the
    earlier answer stands in the turn as a query that the answer then takes one step further, and its rows show
    the set the user means."""
    source = session.set_turn(index)
    return None if source is None else answer_query(session.turns[source], inline_filters, answer_first)


# guided turns have 3 actions: at most this many go to value lookups, one stays for the answer
MAX_SEARCHES = 2


SEARCH_SCOPES = ("property", "graph")


def search_action(typed: dict[str, str], scope: str = "property") -> tuple[str, dict[str, str]]:
    """The SEARCH_VALUES action (plain grammar) that resolves a name as the user typed it
    (``Turn.typed_names``), and its arguments. ``property``: in the label and property that store it;
    ``graph``: the text alone, searched everywhere (the observation names the label and property)."""
    if scope == "graph":
        return "SEARCH_VALUES " + typed["typed"], {"query": typed["typed"]}
    arguments = {"label": typed["label"], "property": typed["property"], "query": typed["typed"]}
    return "SEARCH_VALUES " + json.dumps(arguments, ensure_ascii=False), arguments


def _shows(observation: str, stored: str, scope: str) -> bool:
    """Whether a SEARCH_VALUES observation shows the stored value (graph scope: as a Cypher literal)."""
    if scope == "graph":
        return string_literal(stored) in observation
    return stored in observation


# which names a guided_action example looks up before it answers (``names_to_look_up``)
LOOKUPS = ("typed", "new_names", "unseen")


def names_to_look_up(session: Session, index: int, question: str, policy: str = "typed",
                     prompt: str | None = None) -> list[dict[str, str]]:
    """The names turn ``index`` of ``session`` looks up with SEARCH_VALUES before answering, as
    ``Turn.typed_names`` records (``{label, property, stored, typed, kind}``), at most ``MAX_SEARCHES``.

    ``typed``: the names the user typed as the graph does not store them (a typo, part of the name, other
    case). ``new_names``: those, and every other name or value of the gold (``gold_key_values``) that the
    question (``question``, the text the model is shown) says word for word and no earlier turn named (kind
    ``exact``). An invented name typed wrong reads like one typed right, so a model taught to look up only
    the wrong ones cannot tell when to; looking up each new name first is a rule it can follow.
    ``unseen``: those of ``new_names``, and each name of the gold that the turn prompt (``prompt``, the whole
    text shown) does not show as stored but an earlier question typed otherwise (kind ``earlier``, looked up
    as typed then): "the genre Bostaquork" of turn 1 is ``'Bostaquork Noir'`` in the gold of turn 3 too, and
    no guided prompt shows it (the history holds the questions and results, not the lookups). Without it,
    such a turn teaches the model to write a stored spelling it was never shown."""
    if policy not in LOOKUPS:
        raise RecipeError(f"lookups must be one of {list(LOOKUPS)}, got {policy!r}")
    if policy == "unseen" and prompt is None:
        raise RecipeError("lookups 'unseen' needs the turn prompt")
    turn = session.turns[index]
    out = list(turn.typed_names)
    if policy in ("new_names", "unseen"):
        named = {t["stored"] for t in out}
        for earlier in session.turns[:index]:
            named |= {kv["value"] for kv in earlier.gold_key_values if isinstance(kv.get("value"), str)}
            named |= {t["stored"] for t in earlier.typed_names}
        for kv in turn.gold_key_values:
            value = kv.get("value")
            if isinstance(value, str) and value not in named and _says(question, value):
                out.append({"label": kv["label"], "property": kv["property"], "stored": value, "typed": value,
                            "kind": "exact"})
                named.add(value)
    if policy == "unseen":
        wanted = {t["stored"] for t in out}
        for kv in turn.gold_key_values:
            value = kv.get("value")
            if not isinstance(value, str) or value in wanted or _says(prompt, value):
                continue
            typed = next((t for earlier in session.turns[:index] for t in earlier.typed_names
                          if t["stored"] == value and _says(prompt, t["typed"])), None)
            if typed is not None:
                out.append({**typed, "kind": "earlier"})
                wanted.add(value)
    return out[:MAX_SEARCHES]


def _says(text: str, value: str) -> bool:
    """Whether ``text`` holds ``value`` as a whole word or phrase."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None


def action_conversations(env: CypherTurnToolEnv, row: dict[str, Any], turn, *, session: Session | None = None,
                         lookups: str = "typed", search_scope: str = "property",
                         inline_filters: bool = False, answer_first: bool = False,
                         path_probes: bool = False, set_recall: bool = False) -> list[list[dict[str, str]]]:
    """The guided turn as the CPU recipe teaches it, one conversation per action: the turn prompt (from
    ``env.reset``); for each name the user typed in a form the graph does not store (a typo, part of the name,
    other case: ``Turn.typed_names``), ``SEARCH_VALUES`` with that text, answered by the environment's real
    observation (a user message, as the evaluator's text chat format shows it); then ``action_response``.
    Without the lookups the answer would name a stored value the prompt never shows, which teaches a model to
    make names up. Each conversation ends with the action it teaches; the next one starts with it.
    ``lookups``: which names are looked up (``names_to_look_up``; ``new_names`` needs the turn's ``session``).
    ``search_scope``: how (``search_action``); a graph-wide search whose closest values leave the stored one
    out falls back to the property's search, or is left out for a name the question says word for word (it is
    then a piece of text that the gold tests names with, ``STARTS WITH 'Kh'``, not a stored value).
    ``inline_filters``, ``answer_first``: the answer's form (``action_response``). ``path_probes``: where the
    answer walks from a named node and an action is left before it (guided turns have three), first the path
    probe (``path_probe``: EXECUTE_CYPHER, answered by its real result), and the answer written as its row
    reads (``probed_answer``), kept only where the probe shows the gold's types and the judge scores that
    answer EX 1 against the gold; otherwise the turn goes without. ``set_recall``: a turn that builds on an
    earlier set (``Session.set_turn``) first runs again the answer that built it, EXECUTE_CYPHER in the answer's
    form, answered by its real result, where its lookups leave an action for it (``recall_query``)."""
    messages = turn_prompt(env, row)
    names = turn.typed_names
    if (lookups != "typed" or set_recall) and session is None:
        raise RecipeError("lookups other than 'typed' and set_recall need the turn's session")
    if lookups != "typed":
        question = messages[-1]["content"].rsplit(CURRENT_QUESTION, 1)[-1]  # not the conversation before it
        names = names_to_look_up(session, turn.index, question, lookups, prompt=messages[-1]["content"])
    out = []
    recall = recall_query(session, turn.index, inline_filters, answer_first) if set_recall else None
    if recall is not None and len(names[:MAX_SEARCHES]) + 2 <= GUIDED_CAP:  # the recall and the answer fit
        action = {"role": "assistant", "content": f"EXECUTE_CYPHER {recall}"}
        out.append(messages + [action])
        observation = env.execute_cypher(recall)
        if not observation.startswith("[Query Result]"):  # a gold that ran when built: the database failed it
            raise InvariantError(f"the recall of {row['session']} turn {row['turn']} did not run: {observation[:200]}")
        messages = messages + [action, {"role": "user", "content": observation}]
    for typed in names[:MAX_SEARCHES]:
        action, arguments = search_action(typed, search_scope)
        observation = env.search_values(**arguments)
        if search_scope == "graph" and not _shows(observation, typed["stored"], "graph"):
            if typed["kind"] == "exact":
                continue  # a piece of text the gold tests names with (STARTS WITH 'Kh'), not a stored value
            action, arguments = search_action(typed, "property")
            observation = env.search_values(**arguments)
        out.append(messages + [{"role": "assistant", "content": action}])
        if not _shows(observation, typed["stored"], "graph" if "label" not in arguments else "property"):
            raise InvariantError(f"SEARCH_VALUES {arguments} did not find {typed['stored']!r} on "
                                 f"{row['session']} turn {row['turn']}")
        messages = messages + [{"role": "assistant", "content": action}, {"role": "user", "content": observation}]
    probed = False
    if path_probes:
        if session is None:
            raise RecipeError("path_probes needs the turn's session")
        probed, probe_messages = _probe(env, session.world, turn, out, messages)
        if probed:
            out.append(probe_messages[:-1])
            messages = probe_messages
    out.append(messages + [{"role": "assistant",
                            "content": action_response(turn, inline_filters, answer_first, probed=probed)}])
    return out


def _probe(env: CypherTurnToolEnv, world: str, turn, done: list, messages: list[dict[str, str]]
           ) -> tuple[bool, list[dict[str, str]]]:
    """(whether the path probe serves ``turn``, the conversation with the probe and its observation)."""
    from scoring.score import score_pair

    gold = inline_string_filters(turn.gold_cypher)
    query = path_probe(gold)
    if query is None or len(done) + 2 > GUIDED_CAP:  # the probe and the answer must both fit
        return False, messages
    _, links = _probed_chain(gold)
    row = json.dumps([":" + re.search(r":(\w+)", link).group(1) for link in links], ensure_ascii=False)
    action = "EXECUTE_CYPHER " + query
    observation = env.execute_cypher(query)
    if row not in observation.split("\n") or score_pair(world, gold, probed_answer(gold), with_psjs=False)["ex"] != 1:
        return False, messages
    return True, messages + [{"role": "assistant", "content": action}, {"role": "user", "content": observation}]


SFT_FORMATS = ("guided_tools", "agentic_tools", "paper", "guided_action")


def check_lookups(lookups: str | None, search_scope: str) -> None:
    """Refuse a ``lookups`` (None: no lookups) or ``search_scope`` that ``action_conversations`` does not know
    (RecipeError)."""
    if lookups is not None and lookups not in LOOKUPS:
        raise RecipeError(f"lookups must be one of {list(LOOKUPS)}, got {lookups!r}")
    if search_scope not in SEARCH_SCOPES:
        raise RecipeError(f"search_scope must be one of {list(SEARCH_SCOPES)}, got {search_scope!r}")


def sft_examples(sessions: list[Session], formats: Iterable[str] = ("guided_tools",), *, verify: bool = True,
                 turns: Iterable[int] | None = None, max_chain_depth: int | None = None, chat_tools: bool = True,
                 env_timeout: float = 30.0, progress: bool = False, lookups: str = "typed",
                 search_scope: str = "property", inline_filters: bool = False, answer_first: bool = False,
                 path_probes: bool = False, set_recall: bool = False) -> list[dict[str, Any]]:
    """SFT rows ``{"messages", "tools", "format", "session", "world", "turn"}`` for every turn of ``sessions`` (or
    those ``turns`` and ``max_chain_depth`` keep: ``make_training_rows``) in each format (module docstring):
    ``guided_tools`` / ``agentic_tools``, the oracle's tool-call conversation in that protocol; ``paper``, the
    guided turn prompt answered in the GRPO paper's tagged format;
    ``guided_action``, the guided turn prompt answered with ``SUBMIT_ANSWER <gold>``, after a SEARCH_VALUES
    example for each name the user typed as the graph does not store it (``action_conversations``: such a turn
    gives several rows; ``lookups="new_names"``: also before each name the question says for the first time,
    ``names_to_look_up``; ``inline_filters``: string tests written in the node pattern, ``inline_string_filters``;
    ``answer_first``: anchored paths written from the answer node, ``answer_first_paths``; ``path_probes``: a path
    probe before an answer that walks from a named node, ``path_probe``; ``set_recall``: the answer that built the
    set a follow-up builds on, run again before it, ``recall_query``).
    ``tools`` (a JSON string, what TRL's SFTTrainer reads) declares the five tools when ``chat_tools``,
    as GRPO's ``environment_factory`` and the evaluator's ``tools`` chat format do; else ``None``."""
    from tqdm import tqdm

    bad = [f for f in formats if f not in SFT_FORMATS]
    if bad:
        raise RecipeError(f"unknown SFT format(s) {bad}; use {list(SFT_FORMATS)}")
    check_lookups(lookups, search_scope)
    tools = json.dumps(tool_schemas(), ensure_ascii=False) if chat_tools else None
    by_id = {s.id: s for s in sessions}
    wanted = None if turns is None else list(turns)
    out: list[dict[str, Any]] = []
    for fmt in formats:
        protocol = "agentic" if fmt == "agentic_tools" else "guided"
        env = CypherTurnToolEnv(sessions=sessions, config=EnvConfig(protocol=protocol, timeout=env_timeout))
        rows = make_training_rows(sessions, protocol, turns=wanted, max_chain_depth=max_chain_depth)
        for row in tqdm(rows, desc=f"SFT data ({fmt})", unit="turn", disable=not progress):
            turn = by_id[row["session"]].turns[int(row["turn"])]
            if fmt == "guided_action":
                conversations = action_conversations(env, row, turn, session=by_id[row["session"]], lookups=lookups,
                                                     search_scope=search_scope, inline_filters=inline_filters,
                                                     answer_first=answer_first, path_probes=path_probes,
                                                     set_recall=set_recall)
            elif fmt == "paper":
                conversations = [paper_conversation(env, row, turn)]
            else:
                conversations = [flat_messages(oracle_tool_conversation(env, row, by_id, verify=verify))]
            out += [{"messages": messages, "tools": tools, "format": fmt, "session": row["session"],
                     "world": by_id[row["session"]].world, "turn": int(row["turn"])} for messages in conversations]
    return out


def split_sessions(sessions: list[Session], holdout_fraction: float) -> tuple[list[Session], list[Session]]:
    """(train, held out): the last ``holdout_fraction`` of each world's sessions (in id order) are held out,
    so every world is in both parts (the GRPO paper trains on 90%)."""
    if not 0 <= holdout_fraction < 1:
        raise RecipeError(f"holdout_fraction must be in [0, 1), got {holdout_fraction}")
    by_world: dict[str, list[Session]] = {}
    for s in sorted(sessions, key=lambda s: s.id):
        by_world.setdefault(s.world, []).append(s)
    train, held = [], []
    for group in by_world.values():
        k = int(round(len(group) * holdout_fraction))
        train += group[:len(group) - k]
        held += group[len(group) - k:]
    return train, held


def grpo_rows(sessions: list[Session], mode: str, protocol: str = "guided", *,
              turns: Iterable[int] | None = None, max_chain_depth: int | None = None, env_timeout: float = 30.0,
              lookups: str | None = None, search_scope: str = "property",
              path_probes: bool = False) -> list[dict[str, Any]]:
    """GRPO training rows. ``multi_turn``: ``make_training_rows(..., with_gold=True)`` (the environment
    fills the turn prompt at ``reset``; gold columns reach only the reward functions). ``single_turn``:
    the same rows with the guided turn prompt already in the user message (no environment in the loop;
    the paper's rewards and the execution rewards score the tagged response); with ``lookups``, the prompt
    goes on with the SEARCH_VALUES actions and real observations that ``action_conversations`` puts before
    a guided_action answer, so that the completion is the answer (with ``path_probes``, the path probe too)."""
    if mode not in ("multi_turn", "single_turn"):
        raise RecipeError(f"mode must be 'multi_turn' or 'single_turn', got {mode!r}")
    if lookups is not None and mode != "single_turn":
        raise RecipeError("lookups belong in single_turn prompts (a multi_turn rollout makes its own)")
    if path_probes and lookups is None:
        raise RecipeError("path_probes go on the single_turn prompt after the lookups: set lookups")
    check_lookups(lookups, search_scope)
    rows = make_training_rows(sessions, protocol if mode == "multi_turn" else "guided", turns=turns,
                              max_chain_depth=max_chain_depth, with_gold=True)
    if mode == "single_turn":
        env = CypherTurnToolEnv(sessions=sessions, config=EnvConfig(protocol="guided", timeout=env_timeout))
        by_id = {s.id: s for s in sessions}
        for row in rows:
            if lookups is None:
                row["prompt"] = turn_prompt(env, row)
                continue
            session = by_id[row["session"]]
            answer = action_conversations(env, row, session.turns[int(row["turn"])], session=session,
                                          lookups=lookups, search_scope=search_scope,
                                          path_probes=path_probes)[-1]
            row["prompt"] = answer[:-1]  # everything before the answer it teaches
    return rows
