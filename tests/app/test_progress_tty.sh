#!/bin/bash
# Progress bars on a real terminal (util-linux `script` gives the command a pseudo-terminal):
# `run` and `guideline` draw one on stderr, `-q` silences it, and without a terminal there is none.
# Usage: test_progress_tty.sh MOESIM. Exit 77 (skipped) without `script`.
set -euo pipefail
moesim=$(realpath "$1")
command -v script >/dev/null || { echo "no util-linux script: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > s.yaml <<'YAML'
name: tty
model: {preset: switch-base-8, layers: 2}
hardware: hgx-a100-4gpu-nvlink
workload: {batch_size: 1, seq_len: 32, batches: 3}
policy: [static-ep, eplb]
YAML
tty_run() { script -qec "$*" /dev/null | tr '\r' '\n'; }
tty_run "$moesim" run s.yaml --out r1 > run.txt
grep -q "^run \[##############################\] 6/6 batches" run.txt || { cat run.txt; echo "no run progress bar"; exit 1; }
tty_run "$moesim" run s.yaml --out r2 -q > quiet.txt
! grep -q "batches  elapsed" quiet.txt || { cat quiet.txt; echo "-q drew a progress bar"; exit 1; }
"$moesim" run s.yaml --out r3 2> piped.txt > /dev/null
[ ! -s piped.txt ] || { cat piped.txt; echo "progress drawn without a terminal"; exit 1; }
guide=(guideline --model switch-base-8 --hardware hgx-a100-4gpu-nvlink --skewness 1,2 --bandwidth-GBps 32 --accuracies 0.5,1
       --set model.layers=2 --batches 2 --warmup-batches 0)
tty_run "$moesim" "${guide[@]}" > guide.txt
grep -q "^guideline \[##############################\] 2/2 cells" guide.txt || { cat guide.txt; echo "no guideline bar"; exit 1; }
tty_run "$moesim" "${guide[@]}" -q > guide_quiet.txt
! grep -q "cells  elapsed" guide_quiet.txt || { cat guide_quiet.txt; echo "guideline -q drew a bar"; exit 1; }
echo "ok: progress bars on a terminal for run and guideline; none with -q or without a terminal"
