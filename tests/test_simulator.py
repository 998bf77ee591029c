"""The agentic user simulator: schema probes are refused without leaking, clarifications answered."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmark.session import Turn
from envs.simulator import FALLBACK, REJECTIONS, UserSimulator
from graphs.spec import get_spec

SPEC = get_spec("ancient_empire")
TERMS = set(SPEC.labels) | set(SPEC.relationship_types) | {p.name for n in SPEC.nodes for p in n.properties} | {
    p.name for r in SPEC.relationships for p in r.properties}

PROBES = [
    "What labels does the database have?", "Can you show me the schema?", "Which relationship types exist?",
    "What properties do provinces have?", "What is the exact property name for population?",
    "Is it GOVERNS or RULES?", "Should I use the Emperor label?", "What's the relationship between Province and City called?",
    "Can you write the Cypher for me?", "What query should I run?", "What does the data model look like?",
    "Which node type holds the temples?", "How are the nodes connected?", "What are the edge types?",
    "Is reign_start stored as an integer?", "What column has the tax rate?", "Which field stores the climate?",
    "Tell me the table names.", "How is the graph structured?", "What keys identify a legion?",
    "Do generals have a loyalty attribute?", "Is the name property case-sensitive?", "How is 'arid' spelled in the data?",
    "What's the exact value stored for the dynasty?", "Are there indexes on name?", "Which constraints exist?",
    "What is the data type of treasury?", "Could you list all relationship names?", "Is SWORN_TO directed from General to Emperor?",
    "What should my MATCH clause look like?", "Do I RETURN the name or the id?", "Which database should I query?",
    "Is this Neo4j?", "What attributes does a Deity node carry?", "How many labels are there in the schema?",
    "Give me the node labels please", "what relations connect legions and generals", "which properties are optional",
    "Is COMMANDED_BY the right relationship?", "Can you describe the schema of the temples?",
    "What's stored on the WORSHIPS edge?", "Is devotion a property of the relationship?", "What identifiers do cities have?",
    "Which label do emperors use, Emperor or Ruler?", "Where clause on climate, right?", "Is population a field on City?",
    "Does Legion have a strength property?", "what is the structure of the data", "Tell me about the db",
    "Which graph do I query for provinces?", "Is the annexed_year attribute nullable?", "Could you tell me the schema, briefly?",
    "What's the key property of Temple?", "What node properties can I filter on?",
]

CLARIFY = ["Which one do you mean?", "Do you mean by population or by tax rate?", "Could you clarify what you want?",
           "What do you mean by the top one?", "Can you specify the measure?", "Which measure should I rank by?",
           "By what criterion?", "What exactly should I average?"]


# Plain-English questions that use "return" or "match" as ordinary words: never schema probes.
LEGITIMATE = ["Which ones do you want me to return?", "Should I return all of them or just the top one?",
              "Do the names have to match exactly what you said?", "Do you want me to return their cities too?",
              "Which of them match what you had in mind?", "WHICH ONES DO YOU WANT ME TO RETURN?"]
CODE_PROBES = ["Should I use MATCH (p:Province) for that?", "Is it (e:Emperor)-[:GOVERNS]->(p)?",
               "Do I RETURN p.name?", "What goes in the return clause?", "Can I add a WHERE on the climate?"]


def test_plain_english_return_and_match_are_not_probes_but_code_is():
    sim = UserSimulator(TERMS)
    for q in LEGITIMATE:
        assert sim.classify(q, _turn(ambiguous=False)) == "general", q
        assert sim.classify(q, _turn(ambiguous=True)) != "reject", q
    reply = sim.reply(LEGITIMATE[0], _turn(ambiguous=True), "student", 1)
    assert (reply.intent, reply.reply) == ("disambiguate", "I mean the one with the highest population.")
    for q in CODE_PROBES:
        assert sim.classify(q, _turn(ambiguous=True)) == "reject", q


def _turn(ambiguous: bool) -> Turn:
    info = {"utterance": "Take the top one of those and list its cities.",
            "clarification": "I mean the one with the highest population."} if ambiguous else None
    return Turn(index=2, utterance="Take the province with the highest population and list its cities.",
                gold_cypher="MATCH (p:Province) RETURN p", gold_columns=["name"], gold_rows=[["x"]],
                phenomenon="PIVOT", chain_mode="pivot", depends_on=1, ambiguity_info=info)


def test_probe_set_is_refused_and_no_reply_names_a_schema_term():
    assert len(PROBES) >= 50
    sim = UserSimulator(TERMS)
    replies = [sim.reply(q, _turn(ambiguous=True), "journalist", 1) for q in PROBES]
    rejected = sum(r.intent == "reject" for r in replies)
    assert rejected / len(PROBES) >= 0.95, [q for q, r in zip(PROBES, replies) if r.intent != "reject"]
    assert not [r.reply for r in replies if sim.contains_schema_term(r.reply)]
    # the pool of four rotates
    assert [r.reply for r in replies[:5]] == [*REJECTIONS, REJECTIONS[0]]


def test_clarification_questions_get_the_scripted_clarification_on_ambiguous_turns_only():
    sim = UserSimulator(TERMS)
    for q in CLARIFY:
        r = sim.reply(q, _turn(ambiguous=True), "student", 1)
        assert (r.intent, r.reply) == ("disambiguate", "I mean the one with the highest population."), q
        other = sim.reply(q, _turn(ambiguous=False), "student", 1)
        assert other.intent == "general"


def test_general_replies_are_persona_aware_leak_checked_and_impatient_after_three_asks():
    sim = UserSimulator(TERMS)
    calm = sim.reply("Are you sure about that?", _turn(False), "impatient_exec", 1)
    assert calm.intent == "general" and not sim.contains_schema_term(calm.reply)
    tired = sim.reply("Anything else I should know?", _turn(False), "novice_user", 3)
    assert "please just give me the result" in tired.reply

    class Leaky:
        def reply(self, question, utterance, persona, impatient):
            return "Just look at the Province label and its tax_rate."

    leaky = UserSimulator(TERMS, backend=Leaky()).reply("Are you sure?", _turn(False), "journalist", 1)
    assert leaky.leak_replaced and leaky.reply == FALLBACK


def test_ask_cli_prints_the_simulator_reply(tmp_path):
    from benchmark.session import Session, write_sessions

    session = Session(id="s1", world="ancient_empire", persona="journalist", turns=[_turn(True)])
    write_sessions(tmp_path / "sessions.jsonl", [session])
    out = subprocess.run([sys.executable, "-m", "envs.ask", "--dataset", str(tmp_path), "--session", "s1", "--turn", "2",
                          "Which one do you mean?", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"intent": "disambiguate", "reply": "I mean the one with the highest population.",
                                      "leak_replaced": False}
    out = subprocess.run([sys.executable, "-m", "envs.ask", "--dataset", str(tmp_path), "--session", "s1", "--turn", "2",
                          "What labels are there?", "--json"], capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout)["intent"] == "reject"
