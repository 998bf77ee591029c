"""training/renaming.py: a guided turn shown with its world's labels and relationship types renamed stays one
consistent turn (schema, users' nouns and answer agree, values and results untouched), uses no world's names,
and the SFT recipe's ``rename_schema`` renames the share it says."""

from __future__ import annotations

import random
import re

import pytest

pytestmark = pytest.mark.neo4j


@pytest.fixture(scope="module")
def examples():
    from benchmark.build import cached_dataset
    from benchmark.session import read_sessions
    from training.data import sft_examples

    sessions = list(read_sessions(cached_dataset("train", seed=0, sessions=6, hf=False)))
    world = {s.id: s.world for s in sessions}
    # the answer rows without a value lookup (those with one: test_a_turn_with_lookups_is_renamed_...)
    return [(e, world[e["session"]]) for e in sft_examples(sessions, ["guided_action"], chat_tools=False)
            if len(e["messages"]) == 3 and e["messages"][-1]["content"].startswith("SUBMIT_ANSWER")]


def _schema_part(user: str) -> str:
    """The schema block of a guided turn prompt (envs.prompts: the conversation follows it)."""
    return user.split("\n\nConversation so far:")[0]


def _schema_names(user: str) -> tuple[set[str], set[str]]:
    schema = _schema_part(user)
    return set(re.findall(r"^  \(:(\w+) ", schema, re.M)), set(re.findall(r"-\[:(\w+)", schema))


def _colon_names(text: str) -> set[str]:
    return set(re.findall(r"(?<=:)([A-Za-z_]\w*)", text))


def test_a_renamed_turn_is_one_consistent_turn_in_new_names(examples):
    from graphs.spec import all_specs, get_spec
    from training.renaming import renamed_conversation, renaming

    every_world_name = {n for s in all_specs() for n in [*s.labels, *s.relationship_types]}
    for i, (e, world) in enumerate(examples):
        spec = get_spec(world)
        original = e["messages"]
        renamed = renamed_conversation(original, world, random.Random(i))
        labels, types = renaming(world, random.Random(i), answer=original[-1]["content"])  # the same draw
        new_labels, new_types = _schema_names(renamed[1]["content"])
        assert new_labels == {labels.get(x, x) for x in spec.labels}
        assert new_types == set(types.values()) and not new_types & every_world_name
        assert not set(labels.values()) & every_world_name
        # the answer names only what the renamed schema declares, and renaming back gives the gold
        answer = renamed[-1]["content"]
        assert _colon_names(answer) & (every_world_name | new_labels | new_types) <= new_labels | new_types
        back = {v: k for k, v in {**labels, **types}.items()}
        assert re.sub(r"(?<=:)(\w+)\b", lambda m: back.get(m.group(1), m.group(1)), answer) == original[-1]["content"]
        # the system prompt, the result rows and the string literals are untouched
        assert renamed[0] == original[0]
        rows = lambda text: [ln for ln in text.split("\n") if not ln.startswith(("User: ", "Current question ("))
                             and not ln.startswith("  (")]
        assert rows(renamed[1]["content"]) == rows(original[1]["content"])
        assert re.findall(r"'[^']*'", answer) == re.findall(r"'[^']*'", original[-1]["content"])
        # the users' lines no longer say a renamed label's noun in lower case
        from benchmark.lexicon import Lexicon

        lex = Lexicon.for_world(world)
        users = [ln for ln in renamed[1]["content"].split("\n") if ln.startswith(("User: ", "Current question ("))]
        for old in labels:
            for form in (lex.noun(old, plural=False), lex.noun(old)):
                assert not any(re.search(rf"\b{re.escape(form)}\b", ln) for ln in users), (form, users)


def test_a_label_whose_noun_is_in_a_literal_of_the_answer_keeps_its_name():
    from training.renaming import renaming

    labels, _ = renaming("film_studio", random.Random(0),
                         answer="SUBMIT_ANSWER MATCH (g:Genre {name: 'Studio Noir'}) RETURN g.name AS name")
    assert "Studio" not in labels and "Genre" in labels and "Film" in labels


def test_rename_schema_renames_its_share_and_rejects_a_share_outside_0_1(examples):
    from benchmark.build import cached_dataset
    from benchmark.session import read_sessions
    from training.config import CypherTurnSFTArguments, RecipeError
    from training.trainers import _renamed, run_sft

    sessions = list(read_sessions(cached_dataset("train", seed=0, sessions=6, hf=False)))  # the fixture's build
    rows = [{**e, "messages": e["messages"]} for e, _ in examples]
    assert _renamed(rows, sessions, 0.0, 0) == rows
    every = _renamed(rows, sessions, 1.0, 0)
    assert all(a["messages"][-1] != b["messages"][-1] and a["renaming"] == "own" for a, b in zip(every, rows))
    half = _renamed(rows, sessions, 0.5, 0)
    share = sum(a["messages"][-1] != b["messages"][-1] for a, b in zip(half, rows)) / len(rows)
    assert 0.3 < share < 0.7 and half == _renamed(rows, sessions, 0.5, 0)  # seeded
    with pytest.raises(RecipeError, match="rename_schema"):
        run_sft(CypherTurnSFTArguments(formats=["guided_action"], rename_schema=1.5), None, None)


def test_a_turn_with_lookups_is_renamed_with_them_and_a_draw_is_shared_by_a_world_s_sessions():
    """The shipped recipe looks names up before it answers: the lookup's words, its observation and the answer
    are renamed together, and the renamed sessions of a world share a draw (their openings share one schema in
    a prefix-tree row)."""
    from benchmark.build import cached_dataset
    from benchmark.lexicon import Lexicon
    from benchmark.session import read_sessions
    from envs.actions import SEARCH
    from training.data import sft_examples
    from training.trainers import SESSIONS_PER_DRAW, _renamed

    sessions = list(read_sessions(cached_dataset("train", seed=0, sessions=6, hf=False)))
    world = {s.id: s.world for s in sessions}
    rows = sft_examples(sessions, ["guided_action"], turns=[0], chat_tools=False, lookups="unseen",
                        search_scope="graph", inline_filters=True)
    looked_up = [e for e in rows if any(m["content"].startswith("[Search]") for m in e["messages"])]
    assert looked_up, "no opening with a lookup: nothing tested"
    renamed = _renamed(rows, sessions, 1.0, 0, by_session=True)
    assert all(r["messages"] != e["messages"] and r["renaming"].startswith(world[e["session"]] + "/")
               for r, e in zip(renamed, rows))
    by_draw: dict[str, set] = {}
    for r in renamed:
        by_draw.setdefault(r["renaming"], set()).add(r["session"])
        new_labels, _ = _schema_names(r["messages"][1]["content"])
        old = Lexicon.for_world(world[r["session"]])
        for m in r["messages"][2:]:
            # the observed labels and the answer's are the renamed schema's; no lookup says a renamed noun
            if m["content"].startswith(("[Search]", "SUBMIT_ANSWER")):
                assert set(re.findall(r"\(\w*:(\w+)", m["content"])) <= new_labels, m["content"]
            if m["content"].startswith(SEARCH):
                for label in old.spec.labels:
                    if label not in new_labels:
                        for form in (old.noun(label, plural=False), old.noun(label)):
                            assert not re.search(rf"\b{re.escape(form)}\b", m["content"]), (form, m["content"])
    # one draw, one schema; at most SESSIONS_PER_DRAW sessions to a draw
    for d, members in by_draw.items():
        assert len(members) <= SESSIONS_PER_DRAW
        schemas = {_schema_part(r["messages"][1]["content"]) for r in renamed if r["renaming"] == d}
        assert len(schemas) == 1, d


def test_packing_by_world_keeps_each_draw_of_names_in_rows_of_its_own():
    """A world's openings shown under two schemas (the original and a draw of names, or two draws) would share
    no schema in one prefix-tree row: packed_rows groups by the draw too, and each row shows one schema."""
    from benchmark.build import cached_dataset
    from benchmark.session import read_sessions
    from envs.models import load_tokenizer
    from training.data import sft_examples
    from training.packing import packed_rows
    from training.trainers import _renamed

    sessions = list(read_sessions(cached_dataset("train", seed=0, sessions=12, hf=False)))
    rows = sft_examples(sessions, ["guided_action"], turns=[0], chat_tools=False, lookups="unseen",
                        search_scope="graph", inline_filters=True)
    # the same openings twice: as they are, and renamed, so that every world has both schemas
    renamed = _renamed(rows, sessions, 1.0, 0, by_session=True)
    mixed = rows + renamed
    groups = {(e["world"], e.get("renaming", "")) for e in mixed}
    worlds = {e["world"] for e in mixed}
    assert len(groups) == 2 * len(worlds)
    tok = load_tokenizer("smollm2-135m")
    packed = packed_rows(mixed, tok, 16384, by="world")
    assert len(packed) == len(groups) and sum(r["examples"] for r in packed) == len(mixed)
    schemas = {_schema_part(e["messages"][1]["content"]) for e in mixed}
    for row in packed:
        text = tok.decode(row["input_ids"])
        assert sum(s in text for s in schemas) == 1  # one schema, computed once
