#!/usr/bin/env python3
"""Regenerates quickstart.golden.json from a fresh run. Use only when a model change is meant to
move the quickstart's metrics, and say why in the commit message.

    python3 tests/regression/update_golden.py build/moesim
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

METRICS = [
    "/layer_latency_ms/mean", "/layer_latency_ms/p99", "/ttft_ms/mean", "/throughput_tokens_per_s",
    "/gpu_idle_fraction/mean", "/alltoall_ms", "/load/skewness", "/load/gpu_max_over_mean",
    "/tokens_dropped", "/bytes/intra_node",
]


def pointer(doc, path):
    for part in path.strip("/").split("/"):
        doc = doc[part]
    return doc


def main() -> int:
    moesim = sys.argv[1] if len(sys.argv) > 1 else "build/moesim"
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([moesim, "run", str(root / "scenarios/quickstart.yaml"), "--out", out, "-q"], check=True)
        result = json.loads((Path(out) / "result.json").read_text())
    golden = {run["label"]: {m: pointer(run["metrics"], m) for m in METRICS} for run in result["runs"]}
    (root / "tests/regression/quickstart.golden.json").write_text(json.dumps(golden, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
