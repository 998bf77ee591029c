"""Prefix-tree packing (training/packing.py): a packed row computes for every example what the example alone
computes (logits and loss, on a real model built offline), shares only prompt tokens, and packs a session's
real guided_action examples into far fewer tokens (training/sft.py on such rows: tests/test_training.py)."""

from __future__ import annotations

import math

import pytest

from cypherturn.errors import InputError
from training.packing import IGNORE, PrefixTree, PrefixTreeCollator, pack_group, tree_attention_mask

# three examples (prompt, answer): B leaves A's prompt early, C follows A further than B does, so C's new
# tokens are added after B's, away from A's branch (the flattened order must still put C under A's prefix)
A = ([1, 2, 3, 4, 5], [6, 7])
B = ([1, 2, 8], [9])
C = ([1, 2, 3, 4, 10], [11, 12])


def _tree(*examples):
    tree = PrefixTree()
    for prompt, answer in examples:
        tree.add(prompt + answer, len(prompt))
    return tree


def _paths(row):
    """Each token's ancestor chain (itself first) as tokens, read back from tree_end."""
    import torch

    mask = tree_attention_mask(torch.tensor([row["tree_end"]]))[0, 0]
    return [[row["input_ids"][j] for j in reversed(range(len(row["input_ids"]))) if mask[i, j]]
            for i in range(len(row["input_ids"]))]


def test_a_tree_shares_prompt_tokens_and_flattens_depth_first():
    row = _tree(A, B, C).flatten()
    # 1 2 shared by all, 3 4 by A and C; answers never shared
    assert row["input_ids"] == [1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 8, 9]
    assert row["position_ids"] == [0, 1, 2, 3, 4, 5, 6, 4, 5, 6, 2, 3]
    paths = _paths(row)
    assert paths[row["input_ids"].index(12)] == [12, 11, 10, 4, 3, 2, 1]
    assert paths[row["input_ids"].index(9)] == [9, 8, 2, 1]
    assert paths[row["input_ids"].index(7)] == [7, 6, 5, 4, 3, 2, 1]
    # each target is the next answer token of the node's own example
    targets = dict(zip(row["input_ids"], row["shift_labels"]))
    assert targets == {1: IGNORE, 2: IGNORE, 3: IGNORE, 4: IGNORE, 5: 6, 6: 7, 7: IGNORE, 10: 11, 11: 12,
                       12: IGNORE, 8: 9, 9: IGNORE}


def test_answers_are_never_shared_even_after_the_same_prompt():
    row = _tree(([1, 2], [3, 4]), ([1, 2], [3, 5])).flatten()  # the same prompt answered twice
    assert row["input_ids"] == [1, 2, 3, 4, 2, 3, 5]  # the last prompt token too: it holds the first target
    assert sorted(t for t in row["shift_labels"] if t != IGNORE) == [3, 3, 4, 5]


def test_pack_group_starts_a_new_row_at_max_length():
    rows = pack_group([(p + a, len(p)) for p, a in (A, B, C)], max_length=10)
    assert [r["examples"] for r in rows] == [2, 1]  # A and B fit in 9 tokens; C would make 12
    assert rows[0]["example_tokens"] == 7 + 4
    with pytest.raises(Exception, match="longer than max_length"):
        pack_group([(list(range(20)), 10)], max_length=10)


def test_the_collator_pads_with_tokens_that_see_only_themselves():
    rows = pack_group([(p + a, len(p)) for p, a in (A, B, C)], max_length=64)
    short = pack_group([(B[0] + B[1], len(B[0]))], max_length=64)
    batch = PrefixTreeCollator(pad_token_id=0)(rows + short)
    assert batch["input_ids"].shape == (2, 12)
    mask = tree_attention_mask(batch["tree_end"])
    assert mask[1, 0, 6].nonzero().flatten().tolist() == [6]  # a padding position
    assert (batch["labels"] == batch["shift_labels"]).all() and (batch["shift_labels"][1, 4:] == IGNORE).all()


def test_a_packed_row_gives_each_example_its_own_logits_and_loss():
    import torch

    from envs.models import load_causal_lm

    torch.manual_seed(0)
    model = load_causal_lm("tiny-llama", dtype=torch.float32).eval()
    examples = [([5, 17, 99, 23, 41, 7], [300, 301, 302]), ([5, 17, 99, 64], [310, 311]),
                ([5, 17, 99, 23, 41, 8, 9], [320])]
    rows = pack_group([(p + a, len(p)) for p, a in examples], max_length=64)
    batch = PrefixTreeCollator(pad_token_id=0)(rows)
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                       attention_mask=tree_attention_mask(batch["tree_end"]), labels=batch["labels"],
                       shift_labels=batch["shift_labels"])
        flat_losses, targets = [], 0
        for prompt, answer in examples:
            ids = torch.tensor([prompt + answer])
            labels = ids.clone()
            labels[0, :len(prompt)] = IGNORE
            out = model(input_ids=ids, labels=labels)
            flat_losses.append(out.loss.item() * len(answer))
            targets += len(answer)
            # the logits that predict this example's answer are the same in the row
            row_ids = batch["input_ids"][0].tolist()
            for k, token in enumerate(answer):
                at = [i for i, t in enumerate(row_ids) if t == (prompt + answer)[len(prompt) + k - 1]
                      and batch["shift_labels"][0, i].item() == token]
                assert len(at) == 1
                assert torch.allclose(packed.logits[0, at[0]], out.logits[0, len(prompt) + k - 1], atol=1e-5)
    assert math.isclose(packed.loss.item(), sum(flat_losses) / targets, rel_tol=1e-5)
    assert rows[0]["example_tokens"] == 23 and len(batch["input_ids"][0]) == 15  # 5 17 99 (23 41) computed once


@pytest.mark.neo4j
def test_a_sessions_guided_action_examples_pack_into_far_fewer_tokens():
    from benchmark.build import cached_dataset
    from benchmark.session import read_sessions
    from envs.models import load_tokenizer
    from training.data import sft_examples
    from training.packing import packed_rows, tokenized

    sessions = list(read_sessions(cached_dataset("train", seed=0, sessions=6, hf=False)))[:3]
    examples = sft_examples(sessions, ["guided_action"], chat_tools=False)
    tok = load_tokenizer("smollm2-135m")
    rows = packed_rows(examples, tok, 8192)
    assert len(rows) == 3 and sum(r["examples"] for r in rows) == len(examples)
    flat = sum(len(tokenized(e["messages"], tok)[0]) for e in examples)
    assert sum(r["example_tokens"] for r in rows) == flat
    assert sum(len(r["input_ids"]) for r in rows) < flat / 2.5
    # every answer is a target: the gold after SUBMIT_ANSWER, decoded from the row's targets
    targets = tok.decode([t for r in rows for t in r["shift_labels"] if t != IGNORE])
    for e in examples:
        assert e["messages"][-1]["content"] in targets


@pytest.mark.neo4j
def test_packing_by_world_shares_the_system_prompt_and_schema_between_sessions():
    from benchmark.build import cached_dataset
    from benchmark.session import read_sessions
    from envs.models import load_tokenizer
    from training.data import sft_examples
    from training.packing import packed_rows

    sessions = list(read_sessions(cached_dataset("train", seed=0, sessions=12, hf=False)))
    openings = sft_examples(sessions, ["guided_action"], chat_tools=False, turns=[0], lookups="new_names",
                            search_scope="graph")
    worlds = {e["world"] for e in openings}
    assert len(worlds) < len({e["session"] for e in openings})  # some world has two sessions here
    tok = load_tokenizer("smollm2-135m")
    by_session, by_world = packed_rows(openings, tok, 4096), packed_rows(openings, tok, 4096, by="world")
    assert len(by_session) == len({e["session"] for e in openings}) and len(by_world) == len(worlds)
    assert sum(r["examples"] for r in by_world) == len(openings)
    session_tokens, world_tokens = (sum(len(r["input_ids"]) for r in rows) for rows in (by_session, by_world))
    # each further session of a world costs its question, lookups and answers, not the system prompt and schema
    assert world_tokens < session_tokens - 500 * (len(by_session) - len(by_world))
    targets = tok.decode([t for r in by_world for t in r["shift_labels"] if t != IGNORE])
    for e in openings:
        assert e["messages"][-1]["content"] in targets
    # a world longer than max_length takes several rows, each within it unless one example alone is longer
    short = packed_rows(openings, tok, 1250, by="world")
    assert len(short) > len(worlds) and sum(r["examples"] for r in short) == len(openings)
    assert all(len(r["input_ids"]) <= 1250 or r["examples"] == 1 for r in short)
    with pytest.raises(InputError, match="pack_by"):
        packed_rows(openings, tok, 4096, by="turn")
