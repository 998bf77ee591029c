"""The paper's metrics (DESIGN §7), one per module, each a pure function of results or turn records:

- ``ex``            EX strict: ``is_ordered(cypher)``, ``ex_strict(gold_columns, gold_rows, pred_columns,
                    pred_rows, ordered=)``
- ``ex_relaxed``    EX relaxed: column names ignored, columns matched by value vectors, float tolerance
- ``psjs``          provenance subgraph Jaccard similarity (rewrites queries, runs them on the world)
- ``sem``           session exact match over turn records
- ``cer``           conditional error rate P(EX_t = 0 | EX_{t-1} = 0) over chain-dependent turns
- ``tokens``        Tok/S, mean clean output tokens per session (``<think>`` removed)
- ``actions``       action-usage fractions, budget-exhaustion rate, EX excluding cliff turns
- ``bleu``          Google-BLEU (GLEU) between predicted and gold Cypher
- ``breakdown``     means by world, phenomenon, chain mode, persona, turn position
- ``significance``  bootstrap CIs over sessions, paired bootstrap test, Spearman rank correlation

Turn records (their keys and how unscored and cliff turns are read) are described in
``scoring.records``; ``scoring.score`` scores one (gold, prediction) pair on a world.
"""
