#!/usr/bin/env python3
"""A paper's headline direction holds in its reproduction: runs the one or two grid points the
headline claims of claims.yaml need (seconds) and checks that each claim's winner is the paper's
(verdict reproduced or direction only). `meson test papers_headline_<paper>` runs it.

    test_headlines.py --moesim build/moesim --paper harmoeny|moeshard|moe-gps|grace

A failure means a model change flipped a headline of the claims table: rerun `make papers` and
look at the claim before changing this test.
"""
import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import claims as C  # noqa: E402
import reproduce as R  # noqa: E402

HEADLINES = {
    # α = 0.9, Switch-128 on a DGX-1: HarMoEny beats DeepSpeed, FastMoE, FasterMoE and ExFlow.
    "harmoeny": ["H1", "H4", "H5", "H10"],
    # MoEShard beats DeepSpeed from batch 100 on, and at batch 450.
    "moeshard": ["M1", "M3"],
    # Under MoE-GPS's assumptions, skewness 1.4 on NVLink: distribution-only beats the best
    # token-to-expert predictor, at an intermediate accuracy.
    "moe-gps": ["G1", "G2"],
    # OLMoE on 2 x 2 RTX 4090: GRACE-MoE beats the baselines end to end; hierarchical grouping
    # and topology-aware routing each shorten the all-to-all.
    "grace": ["R6", "R3", "R5"],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moesim", required=True)
    ap.add_argument("--paper", required=True, choices=sorted(HEADLINES))
    args = ap.parse_args()
    _, claims = R.load_claims()
    chosen = [c for c in claims if c["id"] in HEADLINES[args.paper]]
    need = {}
    for c in chosen:
        for e, labels in R.claim_points(c, variants=False).items():
            need.setdefault(e, set()).update(labels)
    with tempfile.TemporaryDirectory() as tmp:
        results, _ = R.run_experiments(args.moesim, [e for e in list(R.EXPERIMENTS) + list(R.GL.GUIDELINES) if e in need], Path(tmp),
                                       verbose=False, only_points=need)
    failed = 0
    for c in chosen:
        row = C.evaluate(results, c)
        ok = row["verdict"] in (C.REPRODUCED, C.DIRECTION_ONLY)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {c['id']} ({c['where']}): {c['claim']} — paper {C.fmt_paper(c)}, "
              f"moesim {row['ours']}: {row['verdict']}{'' if ok else ' — ' + str(row.get('note') or '')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
