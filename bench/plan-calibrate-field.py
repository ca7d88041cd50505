#!/usr/bin/env python3
"""Prints one field of a `cohort plan --json` document for bench/plan-calibrate.sh:
tok_s (batch-1 generation tok/s of the best candidate), best (its label), weights_ms
(its weights term), rest_ms (all other terms of its step), step_ms (the whole
step), coll_ms (its collectives term) or ttft_ms (its time to first token)."""
import json
import sys

doc = json.load(open(sys.argv[1]))
field = sys.argv[2]
best = next((c for c in doc.get("candidates", []) if c["layout"] == doc.get("best")), None)
if best is None:
    sys.exit(f"plan has no best candidate: {doc.get('rejected')} {doc.get('too_big')}")
step = best["step_ms"]
if field == "tok_s":
    print(best["gen_tok_s_batch1"])
elif field == "best":
    print(best["layout"])
elif field == "weights_ms":
    print(step["weights"])
elif field == "step_ms":
    print(sum(step.values()))
elif field == "coll_ms":
    print(step["collectives"])
elif field == "ttft_ms":
    print(best["ttft_ms"])
elif field == "rest_ms":
    print(sum(v for k, v in step.items() if k != "weights"))
else:
    sys.exit(f"unknown field {field}")
