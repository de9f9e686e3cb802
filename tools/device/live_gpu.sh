#!/usr/bin/env bash
# Live transcription on the GPU machine in one device call (issue 26 item 7): build parley
# with CUDA, make a synthetic large-v3-turbo, and run bench/live.py against `parley serve
# --device cuda`: a 62 s take uploaded to a streaming session at real-time speed (last chunk ->
# final result), one Realtime stream (commit -> completed, interim refresh), and concurrent
# Realtime streams at real-time speed. Run from the repository root with .deps/debs carried
# and LIVE_DATA naming a folder (carried) with audio/jfk.wav, audio/silero_test.wav,
# vad/silero_vad_v6.2.onnx, whisper/multilingual.tiktoken and pocketsphinx/{librivox,cards}/*.wav
# (from Debian's pocketsphinx-testdata):
#   LIVE_DATA=w/data tools/device/live_gpu.sh
# Environment: OUT=/tmp/out, BUILD_DIR=/tmp/build-gpu, DTYPE=f16, STREAMS="100 250 500",
#   SECONDS_PER_STREAM=40, BATCH=64 (--whisper-batch), STAGES="session single many",
#   DEADLINE=S (stages that would start later are skipped), MODEL=DIR (default: the
#   synthetic turbo in /tmp/turbo), SAMPLE_LEN=N and SESSION_SAMPLE_LEN=N (serve --sample-len
#   for the Realtime stages and the session stage: random weights never stop, so a cap near
#   what real speech decodes makes their windows cost what real ones do; unset: 224),
#   SERVE_EXTRA="..." (more `parley serve` flags, e.g. --live-audio-ctx fit), LABEL_SUFFIX
#   (appended to each stage's label, to tell runs with other flags apart in live.jsonl).
set -uo pipefail
OUT=${OUT:-/tmp/out}
DTYPE=${DTYPE:-f16}
STREAMS=${STREAMS:-100 250 500}
STAGES=${STAGES:-session single many}
BATCH=${BATCH:-64}
export PARLEY_TEST_DATA=$(realpath "$LIVE_DATA")
export PARLEY_PSTD=$PARLEY_TEST_DATA/pocketsphinx  # the --take long recordings, copied there
source tools/device/lib.sh
M=${MODEL:-/tmp/turbo}
if [[ $M == /tmp/turbo && ! -f $M/config.json ]]; then
  t0=$(date +%s)
  "$P" synth whisper --shape large-v3-turbo --vocab "$LIVE_DATA/whisper/multilingual.tiktoken" \
    --dtype f16 -o $M >/dev/null 2>&1 || echo "synth failed"
  echo "synth turbo: $(($(date +%s) - t0)) s"
fi
SERVE=(--device cuda --dtype "$DTYPE" --whisper-batch "$BATCH" --queue 4096 --sessions-dir /tmp/sessions
  --io-threads ${IO_THREADS:-8} --max-sessions 64 ${SERVE_EXTRA:-})
live() {  # [SL=N] live LABEL ARGS...: one bench/live.py run, JSON lines kept with the label
  local label=$1${LABEL_SUFFIX:-}; shift
  in_time "$label" || return
  echo "== $label${SL:+ (--sample-len $SL)}"
  PYTHONUNBUFFERED=1 python3 bench/live.py --parley "$P" --model $M "$@" --serve-args "${SERVE[@]}" \
    ${SL:+--sample-len $SL} \
    2>"$OUT/$label.err" | sed "s/^{/{\"stage\":\"$label\",/" | tee -a "$OUT/live.jsonl" | cut -c1-600
  tail -3 "$OUT/$label.err"
}
has session && SL=${SESSION_SAMPLE_LEN:-} live session session --runs ${RUNS:-5}
has single && SL=${SAMPLE_LEN:-} live single realtime --streams 1 --seconds 62
has single && SL=${SAMPLE_LEN:-} live single_manual realtime --streams 1 --take long --repeat 1 --manual
has many && SL=${SAMPLE_LEN:-} live many realtime --streams $STREAMS --seconds ${SECONDS_PER_STREAM:-40} --stagger 5 \
  --procs ${PROCS:-12}
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
