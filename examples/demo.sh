#!/usr/bin/env bash
# `make demo`: record real runs of the bundled toy trainer, compare them, replay one.
# Runs in this checkout; run records go to the `experiments` branch, `main` is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
TRAIN=(python3 examples/toy_grpo/train.py --num-rollout 8 --rollout-batch-size 16 --n-samples-per-prompt 4
       --seed 1234 --rollout-seed 42)
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. a baseline run (ledger adds --save-debug-rollout-data so it can be replayed)"
ledger run --name demo-base --note "make demo baseline" -- "${TRAIN[@]}" --lr 0.05 > /dev/null

say "2. the same run with one setting changed: --offload-rollout"
ledger run --name demo-offload -- "${TRAIN[@]}" --lr 0.05 --offload-rollout > /dev/null

say "3. the ledger"
ledger list --changed | tail -n 6

say "4. diff: exactly one setting differs, so the comparison is allowed"
ledger diff latest~1 latest --no-git-diff

say "5. a pair that changes two settings is refused (exit 3)"
ledger run --name demo-two -- "${TRAIN[@]}" --lr 0.02 --offload-rollout > /dev/null
set +e
ledger diff latest~2 latest --no-git-diff
echo "(exit $?)"
set -e

say "6. replay the baseline's training side on its recorded rollouts 2..4, twice, changing only lr"
BASE=$(ledger path latest~2 | xargs basename)
ledger replay "$BASE" --steps 2:5 --name demo-replay-a --yes > /dev/null
ledger replay "$BASE" --steps 2:5 --set lr=0.02 --name demo-replay-b --yes > /dev/null
ledger diff latest~1 latest --no-git-diff

say "done: \`git log --first-parent --oneline experiments\` shows the runs"
git log --first-parent --oneline -n 6 experiments
