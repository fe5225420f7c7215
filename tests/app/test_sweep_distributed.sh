#!/bin/bash
# A sweep split into shards the way the README runs it across machines, checked against the same
# sweep on one machine: (1) GNU parallel with two workers (--joblog, then --resume), (2) the Slurm
# job-array script run task by task with the environment Slurm gives an array task. Both merges
# must equal the unsharded results.csv and sweep.json byte for byte.
# Usage: test_sweep_distributed.sh MOESIM SOURCE_ROOT. Exit 77 (skipped) without GNU parallel.
set -euo pipefail
moesim=$(realpath "$1")
root=$2
command -v parallel >/dev/null || { echo "GNU parallel not installed (make deps installs it): skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > s.yaml <<'YAML'
name: shards
model: {preset: switch-base-8, layers: 2}
hardware: hgx-a100-4gpu-nvlink
workload: {batch_size: 1, seq_len: 32, batches: 1, routing: {kind: zipf, s: 1.2}}
policy: [static-ep, {name: static-ep, label: rr, placement: round-robin}]
YAML
axes=(--grid seed=1:5:1 --grid workload.seq_len=16,32)
"$moesim" sweep s.yaml "${axes[@]}" --out whole --jobs 2 >/dev/null

# (1) GNU parallel: 4 shards on 2 workers of this machine (the README's recipe adds --sshloginfile).
seq 1 4 | parallel --will-cite --jobs 2 --joblog par.log "$moesim" sweep s.yaml "${axes[@]}" --shard {}/4 --out par/shard-{} --jobs 1 >/dev/null
[ "$(tail -n +2 par.log | awk '$7 != 0' | wc -l)" = 0 ] || { echo "a parallel job failed:"; cat par.log; exit 1; }
[ "$(tail -n +2 par.log | wc -l)" = 4 ] || { echo "expected 4 jobs in the joblog"; cat par.log; exit 1; }
# --resume with the same joblog runs nothing again.
seq 1 4 | parallel --will-cite --jobs 2 --joblog par.log --resume "$moesim" sweep s.yaml "${axes[@]}" --shard {}/4 --out par/shard-{} --jobs 1 >/dev/null
[ "$(tail -n +2 par.log | wc -l)" = 4 ] || { echo "--resume ran jobs again"; cat par.log; exit 1; }
"$moesim" sweep merge par/shard-* --out par/merged >/dev/null
cmp whole/results.csv par/merged/results.csv
cmp whole/sweep.json par/merged/sweep.json
echo "ok: GNU parallel, 4 shards on 2 workers, merged results.csv identical to one machine's"

# (2) The Slurm job array script, each task run as Slurm would (array 0-2: ids start at 0).
for id in 0 1 2; do
  SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=3 SLURM_CPUS_PER_TASK=1 MOESIM="$moesim" \
    bash "$root/scenarios/slurm/sweep.sbatch" s.yaml slurm "${axes[@]}" >/dev/null
done
"$moesim" sweep merge slurm/shard-* --out slurm/merged >/dev/null
cmp whole/results.csv slurm/merged/results.csv
echo "ok: Slurm array script, 3 tasks, merged results.csv identical to one machine's"
# Outside a job array the script fails, saying what to do.
if MOESIM="$moesim" bash "$root/scenarios/slurm/sweep.sbatch" s.yaml x 2>err.txt; then echo "ran outside an array"; exit 1; fi
grep -q "submit with sbatch --array=1-N" err.txt
