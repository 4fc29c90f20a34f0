# The GPU runs the open issues wait for, as named parts of one device call (the device tool of the
# tool library; run from the repository root there, carry [".device", ".kb"]):
#
#   here:   ../shared/tools/device-bundle.sh
#           git archive --format=tar HEAD | gzip > .device/head.tgz && git rev-parse HEAD > .device/commit
#   there:  BUDGET=540 bash scripts/device-calls.sh tests kb redteam      (give the call timeout_s 600)
#
# Parts, in the order given; each gets what is left of BUDGET seconds (default 540), and one that
# would get under 40 s is skipped and says so:
#   tests     the GPU tests of the hang deadline, the largest level-1 input and the gate, with
#             benchmarks/probes/memtrace loaded (the judge's memory at each step, in the logs)
#   kb        benchmarks/kernelbench_all.py, levels 1 and 2 at 8 in flight   -> kernelbench_all_DEV.json
#   kbeval    the same record resumed; each candidate screened alone, then KernelBench's own eval
#             of it                                                            -> kernelbench_all_DEV.json
#   redteam   every red-team case, the gated stream on                         -> redteam_stream_DEV.json
#   boundary  the 25 examples one at a time, the gated stream on               -> boundary_stream_DEV.json
#   cost      the 25 examples one at a time at the default options, then the same at the commit
#             before the judge (.device/before.tgz and .device/before_commit, made here with
#             git archive --format=tar e3d4bb1 | gzip > .device/before.tgz; echo e3d4bb1... > .device/before_commit)
#                                                   -> boundary_DEV.json, boundary_before_DEV.json
#   corpus    the study corpus at 8 in flight, the gated stream on             -> gate_corpus_DEV_stream.json
#   corpus_default  the same at the default options (the stream off)           -> gate_corpus_DEV.json
#   truth     benchmarks/truth.py's independent labels of the same corpus      -> truth_DEV.json
#   throughput  cold and warm, best settings first                             -> throughput_DEV.json
# DEV is h200 or h100, from the card. Records land in $OUT; the logs in one tar ($OUT/logs.tgz):
# a call brings back at most 8 files.
source scripts/device-prep.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in *H200*) DEV=h200 ;; *) DEV=h100 ;; esac
LOGS=$OUT/logs
mkdir -p "$LOGS"
T0=$(date +%s)
left() { echo $(( ${BUDGET:-540} - ($(date +%s) - T0) )); }
# The first lines of every log this script keeps, written by it (a log committed as a record needs
# no hand-written header): the command, the card and its UUID, the commit, the date, the versions.
header() {
  echo "# $1"
  echo "# device: $(nvidia-smi --query-gpu=name,uuid --format=csv,noheader | head -1); commit $KERNELGATE_COMMIT;" \
       "$(date -u +%Y-%m-%dT%H:%M:%SZ); $(python3 -c 'import sys, torch, triton; print(f"torch {torch.__version__}, triton {triton.__version__}, python {sys.version.split()[0]}")')"
}

for part in "$@"; do
  L=$(left)
  if [ "$L" -lt 40 ]; then echo "$part: skipped, ${L} s left"; continue; fi
  case "$part" in
    tests)
      header "python3 -m pytest -q -m gpu tests/test_gpu_deadlines.py tests/test_gpu_gate.py tests/test_numerics.py (scripts/device-calls.sh $*)" \
        > "$LOGS/pytest_gpu.log"
      PYTHONPATH="$W/benchmarks/probes/memtrace:$PYTHONPATH" timeout $(( L < 330 ? L : 330 )) \
        python3 -m pytest -q -m gpu tests/test_gpu_deadlines.py tests/test_gpu_gate.py tests/test_numerics.py -p no:cacheprovider \
        >> "$LOGS/pytest_gpu.log" 2>&1
      echo "tests rc=$?"; tail -4 "$LOGS/pytest_gpu.log"
      cp benchmarks/probes/memtrace/memtrace.log "$LOGS/" 2>/dev/null
      grep "raise\|stage_done" "$LOGS/memtrace.log" | tail -12 ;;
    kb)
      rm -f benchmarks/probes/memtrace/memtrace.log  # the judges' memory at each step, per problem (pid)
      PYTHONPATH="$W/benchmarks/probes/memtrace:$PYTHONPATH" timeout "$L" python3 benchmarks/kernelbench_all.py \
        --kernelbench .kb --levels 1 2 --concurrency 8 --adaptive \
        --out "$OUT/kernelbench_all_$DEV.json" --gate-deadline-s $(( L - 30 )) --deadline-s $(( L - 20 )) \
        > "$LOGS/kb.log" 2>&1
      echo "kb rc=$?"; tail -20 "$LOGS/kb.log"
      { header "benchmarks/probes/memtrace during the kb part (scripts/device-calls.sh $*)"
        cat benchmarks/probes/memtrace/memtrace.log; } > "$LOGS/memtrace_kb.log" 2>/dev/null ;;
    kbeval)
      prev=$OUT/kernelbench_all_$DEV.json; [ -f "$prev" ] || prev=benchmarks/results/kernelbench_all_$DEV.json
      cp "$prev" /tmp/kb_prev.json 2>/dev/null
      timeout "$L" python3 benchmarks/kernelbench_all.py --kernelbench .kb --levels 1 2 --concurrency 8 --adaptive \
        --resume /tmp/kb_prev.json --out "$OUT/kernelbench_all_$DEV.json" --gate-deadline-s 1 \
        --deadline-s $(( L - 70 )) --kernelbench-eval --gate-alone --kb-timeout-s 60 > "$LOGS/kbeval.log" 2>&1
      echo "kbeval rc=$?"; tail -12 "$LOGS/kbeval.log" ;;
    redteam)
      timeout "$L" python3 benchmarks/redteam.py --stream-check --out "$OUT/redteam_stream_$DEV.json" \
        > "$LOGS/redteam.log" 2>&1
      echo "redteam rc=$?"; python3 benchmarks/redteam.py --table "$OUT/redteam_stream_$DEV.json" | tail -70 ;;
    boundary)
      timeout "$L" python3 benchmarks/boundary.py --stream-check --out "$OUT/boundary_stream_$DEV.json" \
        > "$LOGS/boundary.log" 2>&1
      echo "boundary rc=$?"; tail -5 "$LOGS/boundary.log" ;;
    cost)
      timeout $(( L / 2 )) python3 benchmarks/boundary.py --out "$OUT/boundary_$DEV.json" > "$LOGS/cost.log" 2>&1
      echo "cost (now) rc=$?"; tail -3 "$LOGS/cost.log"
      B=$(mktemp -d) && tar -C "$B" -xzf .device/before.tgz \
        && PYTHONPATH="$B:$SITE" KERNELGATE_COMMIT="$(cat .device/before_commit)" \
            timeout $(( $(left) - 10 )) python3 benchmarks/boundary.py --out "$OUT/boundary_before_$DEV.json" \
        >> "$LOGS/cost.log" 2>&1  # this tree's script and examples, the old package (first on the path)
      echo "cost (before the judge) rc=$?"; tail -3 "$LOGS/cost.log" ;;
    corpus)
      timeout "$L" python3 benchmarks/score_truth.py screen --corpus benchmarks/corpus_existing.json \
        examples/corpus_oos/manifest.json --concurrency 8 --stream-check --deadline-s $(( L - 40 )) --grace-s 25 \
        --out "$OUT/gate_corpus_${DEV}_stream.json" > "$LOGS/corpus.log" 2>&1
      echo "corpus rc=$?"; tail -5 "$LOGS/corpus.log" ;;
    corpus_default)
      timeout "$L" python3 benchmarks/score_truth.py screen --corpus benchmarks/corpus_existing.json \
        examples/corpus_oos/manifest.json --concurrency 8 --deadline-s $(( L - 40 )) --grace-s 25 \
        --out "$OUT/gate_corpus_${DEV}.json" > "$LOGS/corpus_default.log" 2>&1
      echo "corpus_default rc=$?"; tail -5 "$LOGS/corpus_default.log" ;;
    truth)
      timeout "$L" python3 benchmarks/truth.py --corpus benchmarks/corpus_existing.json \
        examples/corpus_oos/manifest.json --out "$OUT/truth_${DEV}.json" --workers 6 \
        --deadline-s $(( L - 20 < 330 ? L - 20 : 330 )) --entry-timeout-s 240 > "$LOGS/truth.log" 2>&1
      echo "truth rc=$?"; tail -8 "$LOGS/truth.log" ;;
    throughput)
      timeout "$L" python3 benchmarks/throughput.py --out "$OUT/throughput_$DEV.json" --modes cold-best warm-best cold \
        > "$LOGS/throughput.log" 2>&1
      echo "throughput rc=$?"; tail -8 "$LOGS/throughput.log" ;;
    *) echo "unknown part: $part" ;;
  esac
  echo "after $part: $(( $(date +%s) - T0 )) s"
done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
