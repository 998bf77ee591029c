#!/bin/bash
# Issue 22 costs: before (22a2092^ = b32728a) vs after (h22b), interleaved A B A B in one window.
PY=/work/main/.venv/bin/python
A=/tmp/h22-before; B=/work/h22b; OUT=/tmp/h22b-costs
L() { uptime | sed 's/.*load average: //'; }
for run in A1 B1 A2 B2; do
  tag=${run:0:1}; T=${!tag}
  echo "== cold $run $(date +%T) load: $(L)" >> $OUT/log
  CYPHERTURN_NEO4J_BASE_PORT=22687 PYTHONPATH=$T nice -n 15 $PY $B/scripts/bench_neo4j.py --repeats 200 > $OUT/cold-$run.txt 2>&1
  echo "   end $(date +%T) load: $(L)" >> $OUT/log
done
for run in A1 B1 A2 B2; do
  tag=${run:0:1}; T=${!tag}
  echo "== scorer $run $(date +%T) load: $(L)" >> $OUT/log
  CYPHERTURN_HOME=/tmp/h22b-home CYPHERTURN_NEO4J_BASE_PORT=21687 PYTHONPATH=$T nice -n 15 $PY $T/scripts/bench_scorer.py \
    --compare --pairs 400 --golds 80 > $OUT/scorer-$run.txt 2>&1
  echo "   end $(date +%T) load: $(L)" >> $OUT/log
done
echo "== all done $(date +%T)" >> $OUT/log
