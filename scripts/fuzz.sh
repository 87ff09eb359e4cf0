#!/usr/bin/env bash
# Fuzzing detforge's readers (fuzz/README.md, docs/security.md): libFuzzer targets built by clang
# with ASan and UBSan in build-fuzz/.
#   scripts/fuzz.sh build                   configure and build every target
#   scripts/fuzz.sh test [ctest args]       build, then each target for DETFORGE_FUZZ_SECONDS
#                                           (default 10) from its seeds: ctest label `fuzz`, in CI
#   scripts/fuzz.sh run TARGET SECONDS      a campaign of one target; its figures are appended to
#                                           fuzz/campaigns.tsv (committed: the record outlives the
#                                           checkout), crashes land in build-fuzz/fuzz_findings/
#   scripts/fuzz.sh report                  fuzz/campaigns.tsv summed per target, as a markdown
#                                           table (docs/security.md's)
#   scripts/fuzz.sh seeds                   rewrite fuzz/corpus/ with the references (Python) and
#                                           the checkpoint seed with detforge
#   scripts/fuzz.sh list                    the targets
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"
record="$root/fuzz/campaigns.tsv"
venv="$root/.venv"
targets=(torch_file pickle safetensors config coco yolo voc image_header checkpoint)
export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-14/bin/llvm-symbolizer}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

log() { echo "[fuzz] $*"; }

build_all() {
  if [ ! -f "$build/build.ninja" ]; then
    local prefix
    prefix="$("$venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
    log "configuring $build (clang, libFuzzer, ASan, UBSan)"
    CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DDETFORGE_FUZZ=ON -DCMAKE_PREFIX_PATH="$prefix" -DDETFORGE_PYTHON="$venv/bin/python" \
      -DDETFORGE_FUZZ_SECONDS="${DETFORGE_FUZZ_SECONDS:-10}" >/dev/null
  fi
  log "building ${#targets[@]} targets (-j${DETFORGE_JOBS:-2})"
  cmake --build "$build" -j "${DETFORGE_JOBS:-2}" --target "${targets[@]/#/fuzz_}"
}

# One campaign: TARGET for SECONDS (wall clock) on its growing corpus; appends date, target, 1
# campaign, wall seconds, CPU seconds (what the figures in docs/security.md add up), executions,
# corpus size, coverage (libFuzzer's cov) and the crash files it saved to fuzz/campaigns.tsv.
run_campaign() {
  local target="$1" seconds="$2"
  local work="$build/fuzz_corpus/$target" findings="$build/fuzz_findings"
  # One log per campaign: two campaigns of a target at once must not share one.
  local dict="$root/fuzz/dict/$target.dict" out="$build/campaign-$target.$$.log"
  mkdir -p "$work" "$findings"
  log "$target: ${seconds}s, corpus $work"
  local args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 -print_final_stats=1
              -artifact_prefix="$findings/$target-")
  [ -f "$dict" ] && args+=(-dict="$dict")
  # The targets write each input to a scratch file (fuzz/harness.h): in memory where /dev/shm is,
  # since on the disk image_header waited for it half of its time.
  local scratch="${TMPDIR:-/tmp}"
  if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then scratch=/dev/shm; fi
  local status=0 TIMEFORMAT='%U %S' cpu before
  before="$(count_crashes "$target")"
  cpu="$( { time TMPDIR="$scratch" OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0 \
    "$build/fuzz/fuzz_$target" \
    "${args[@]}" "$work" "$root/fuzz/corpus/$target" >"$out" 2>&1; } 2>&1 )" || status=$?
  cpu="$(echo "$cpu" | tail -1 | awk '{printf "%.0f", $1 + $2}')"
  local execs cov crashes
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out" | grep -o '[0-9]*$' || echo 0)"
  cov="$(grep -o 'cov: [0-9]*' "$out" | tail -1 | grep -o '[0-9]*' || echo 0)"
  crashes=$(($(count_crashes "$target") - before))
  printf '%s\t%s\t1\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" "$seconds" "$cpu" \
    "$execs" "$(find "$work" -type f | wc -l)" "$cov" "$crashes" >>"$record"
  tail -3 "$out"
  return "$status"
}

# Crash, leak, timeout and out-of-memory inputs of TARGET saved so far; not libFuzzer's slow-unit
# reports (a unit over -report_slow_units seconds of wall time, which a campaign at nice 19 beside
# a build gets from waiting for the CPU).
count_crashes() {
  find "$build/fuzz_findings" \( -name "$1-crash-*" -o -name "$1-leak-*" -o -name "$1-timeout-*" \
    -o -name "$1-oom-*" \) | wc -l
}

write_seeds() {
  "$venv/bin/python" "$root/fuzz/make_seeds.py" "$root/fuzz/corpus" "$root"
  mkdir -p "$root/fuzz/corpus/checkpoint"
  DETFORGE_FUZZ_WRITE_SEED="$root/fuzz/corpus/checkpoint/linear.ckpt" \
    ASAN_OPTIONS=detect_leaks=0 "$build/fuzz/fuzz_checkpoint"
  log "seeds written to fuzz/corpus/"
}

case "${1:-}" in
  build) build_all ;;
  test)
    shift
    build_all
    cd "$build"
    ctest -L fuzz -j "${DETFORGE_JOBS:-2}" --output-on-failure "$@"
    ;;
  run)
    [ $# -eq 3 ] || { echo "usage: scripts/fuzz.sh run TARGET SECONDS" >&2; exit 2; }
    [ -x "$build/fuzz/fuzz_$2" ] || build_all
    run_campaign "$2" "$3"
    ;;
  seeds)
    build_all
    write_seeds
    ;;
  report)
    echo "| target | campaigns | CPU time | executions | corpus | coverage (cov) | crash inputs |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    awk -F'\t' '/^#/ { next } { n[$2] += $3; cpu[$2] += $5; ex[$2] += $6; corpus[$2] = $7;
                   if ($8 > cov[$2]) cov[$2] = $8; crash[$2] += $9 }
      END { for (t in n) printf "| %s | %d | %.0f min | %d | %d | %d | %d |\n",
                                t, n[t], cpu[t] / 60, ex[t], corpus[t], cov[t], crash[t] }' \
      "$record" | sort
    ;;
  list) printf '%s\n' "${targets[@]}" ;;
  *) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac
