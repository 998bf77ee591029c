"""How close an SFT adapter comes to the gold answers when it is fed them: teacher-forced loss and accuracy of
the guided_action answers of sessions it did not train on, by turn position. Forward passes only.

    python scripts/teacher_forced_probe.py runs/demo7/sft runs/demo7/heldout/sessions.jsonl --sessions 11

Each example is the turn prompt the SFT data builds (``training.data.sft_examples``, guided_action, the
adapter's own ``lookups`` policy) followed by its gold action, tokenized as SFT tokenizes it
(``training.packing.tokenized``: the chat template, its end-of-turn tokens included); the answer tokens are
scored against the adapter's next-token prediction given every earlier gold token. Printed, as JSON, for all
actions, the final SUBMIT_ANSWERs, and the SUBMIT_ANSWERs of openings and of later turns: ``nll`` (mean per
answer token), ``tok_acc`` (the share of answer tokens that are the argmax) and ``tf_exact`` (the share of
answers whose every token is the argmax); then, per SUBMIT_ANSWER, the gold text up to the first token the
model would not have written. Low NLL with ``tf_exact`` near 0 means the model learnt the boilerplate and
misses the few tokens that decide the query (a label, a relationship type, a value).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def summary(rows: list[dict]) -> dict:
    if not rows:
        return {"n": 0}
    return {"n": len(rows), "nll": round(sum(r["nll"] for r in rows) / len(rows), 3),
            "tok_acc": round(sum(r["acc"] for r in rows) / len(rows), 3),
            "tf_exact": round(sum(r["exact"] for r in rows) / len(rows), 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("adapter", help="an SFT output directory holding a LoRA adapter (training/sft.py --output_dir)")
    p.add_argument("sessions", help="a sessions.jsonl the adapter did not train on (e.g. a demo run's heldout/)")
    p.add_argument("--sessions", dest="limit", type=int, default=11, help="the first N sessions of the file")
    p.add_argument("--show", type=int, default=12, help="SUBMIT_ANSWERs whose first miss is printed")
    args = p.parse_args(argv)
    adapter, path = Path(args.adapter), Path(args.sessions)
    if not (adapter / "adapter_config.json").is_file():
        p.error(f"{adapter} holds no LoRA adapter (adapter_config.json)")
    if not path.is_file():
        p.error(f"no such sessions file: {path}")
    if args.limit < 1:
        p.error("--sessions must be positive")

    import torch
    from peft import PeftModel

    from benchmark.session import read_sessions
    from envs.models import load_causal_lm, load_tokenizer
    from training.data import sft_examples
    from training.packing import tokenized

    marker = json.loads((adapter / "cypherturn.json").read_text()) if (adapter / "cypherturn.json").is_file() else {}
    base = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
    sessions = list(read_sessions(path))[:args.limit]
    examples = sft_examples(sessions, ("guided_action",), chat_tools=False, lookups=marker.get("lookups", "typed"),
                            search_scope=marker.get("search_scope", "property"),
                            inline_filters=marker.get("inline_filters", False),
                            answer_first=marker.get("answer_first", False),
                            path_probes=marker.get("path_probes", False), set_recall=marker.get("set_recall", False))
    tok = load_tokenizer(str(adapter))
    model = PeftModel.from_pretrained(load_causal_lm(base, dtype=torch.float32), str(adapter)).merge_and_unload()
    model.eval()
    rows, start = [], time.time()
    for example in examples:
        ids, prompt_len = tokenized(example["messages"], tok)  # the very tokens SFT trains on
        ids = torch.tensor([ids])
        with torch.no_grad():
            logits = model(ids).logits[0, prompt_len - 1:-1].float()
        target = ids[0, prompt_len:]
        hits = logits.argmax(-1) == target
        first_miss = None if hits.all() else int((~hits).nonzero()[0])
        rows.append({"session": example["session"], "turn": example["turn"],
                     "nll": torch.nn.functional.cross_entropy(logits, target).item(),
                     "acc": hits.float().mean().item(), "exact": bool(hits.all()),
                     "submit": example["messages"][-1]["content"].startswith("SUBMIT_ANSWER"),
                     "up_to_miss": None if first_miss is None else tok.decode(target[:first_miss + 1])})
    print(f"{len(rows)} examples of {len(sessions)} sessions, {time.time() - start:.0f} s", file=sys.stderr)
    submits = [r for r in rows if r["submit"]]
    print(json.dumps({"all": summary(rows), "submit": summary(submits),
                      "opening_submit": summary([r for r in submits if r["turn"] == 0]),
                      "later_submit": summary([r for r in submits if r["turn"] > 0])}))
    for r in submits[:args.show]:
        print(f"{r['session']} turn {r['turn'] + 1}: " +
              ("every token the argmax" if r["exact"] else f"first miss at the end of {r['up_to_miss']!r}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
