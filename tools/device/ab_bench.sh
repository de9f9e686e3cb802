#!/usr/bin/env bash
# Alternated A/B runs of `parley bench whisper` on one machine, for comparisons inside one
# device call (machines differ by up to 10 % between calls, bench/RESULTS.md):
#   ARMS="base: nofold:PARLEY_NORM_FOLD=0 both:PARLEY_X=0,PARLEY_Y=0" ROUNDS=3 \
#     tools/device/ab_bench.sh PARLEY MODEL AUDIO OUTDIR [bench flags...]
# Each arm is name:VAR=VALUE[,VAR=VALUE...] (an empty list: the defaults). Every round runs
# every arm once, in order, so drift over the call hits them alike. Run r of arm A goes to
# OUTDIR/ab_A_r.jsonl; the summary (tools/device/ab_summary.py) follows. Bench flags default
# to --device cuda --dtype f16 --runs 10.
set -uo pipefail
if [[ $# -lt 4 ]]; then
  sed -n 2,9p "$0"
  exit 2
fi
parley=$1 model=$2 audio=$3 outdir=$4
shift 4
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(--device cuda --dtype f16 --runs 10)
mkdir -p "$outdir"
here=$(dirname "$0")
for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
  for arm in ${ARMS:-base:}; do
    name=${arm%%:*} vars=${arm#*:}
    env_args=()
    IFS=, read -ra pairs <<<"$vars"
    for p in "${pairs[@]}"; do [[ -n $p ]] && env_args+=("$p"); done
    env "${env_args[@]}" "$parley" bench whisper -m "$model" --audio "$audio" "${flags[@]}" \
      >"$outdir/ab_${name}_$r.jsonl" 2>"$outdir/ab_${name}_$r.log" ||
      echo "ab_bench: arm $name round $r failed (see $outdir/ab_${name}_$r.log)" >&2
  done
done
python3 "$here/ab_summary.py" "$outdir" --runs
