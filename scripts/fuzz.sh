#!/usr/bin/env bash
# Fuzzing detforge's readers (fuzz/README.md, docs/security.md): libFuzzer targets built by clang
# with ASan and UBSan in build-fuzz/.
#   scripts/fuzz.sh build                   configure and build every target
#   scripts/fuzz.sh test [ctest args]       build, then each target for DETFORGE_FUZZ_SECONDS
#                                           (default 10) from its seeds: ctest label `fuzz`, in CI
#   scripts/fuzz.sh run TARGET SECONDS      a campaign of one target, from the corpus the earlier
#                                           ones reached (fuzz/reached.tar.xz on a new checkout);
#                                           its figures are appended to fuzz/campaigns.tsv
#                                           (committed: the record outlives the checkout), crash
#                                           and leak inputs land in build-fuzz/fuzz_findings/
#   scripts/fuzz.sh keep                    every target's corpus minimised (libFuzzer -merge=1)
#                                           into fuzz/reached.tar.xz, to commit
#   scripts/fuzz.sh report                  fuzz/campaigns.tsv summed per target, as a markdown
#                                           table (docs/security.md's): all rows, and apart the
#                                           CPU and wall time of the rows this script measured
#   scripts/fuzz.sh seeds                   rewrite fuzz/corpus/ with the references (Python) and
#                                           the checkpoint seed with detforge
#   scripts/fuzz.sh list                    the targets
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"
record="$root/fuzz/campaigns.tsv"
reached="$root/fuzz/reached.tar.xz"
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

# One campaign: TARGET for SECONDS (wall clock) on its growing corpus, with leak detection;
# appends date, target, 1 campaign, measured wall and CPU seconds (CPU: what the figures in
# docs/security.md add up), executions, corpus size, coverage (libFuzzer's cov), the crash and
# the leak inputs it saved, and `run` (measured by this script) to fuzz/campaigns.tsv.
run_campaign() {
  local target="$1" seconds="$2"
  local work="$build/fuzz_corpus/$target" findings="$build/fuzz_findings"
  # One log per campaign: two campaigns of a target at once must not share one.
  local dict="$root/fuzz/dict/$target.dict" out="$build/campaign-$target.$$.log"
  mkdir -p "$work" "$findings"
  if [ -z "$(ls -A "$work")" ] && [ -f "$reached" ]; then
    tar -xJf "$reached" -C "$work" --strip-components=1 "$target/"
    log "$target: continuing from the $(find "$work" -type f | wc -l) inputs of fuzz/reached.tar.xz"
  fi
  log "$target: ${seconds}s, corpus $work"
  local args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 -print_final_stats=1
              -artifact_prefix="$findings/$target-")
  [ -f "$dict" ] && args+=(-dict="$dict")
  # The targets write each input to a scratch file (fuzz/harness.h): in memory where /dev/shm is,
  # since on the disk image_header waited for it half of its time.
  local scratch="${TMPDIR:-/tmp}"
  if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then scratch=/dev/shm; fi
  local status=0 TIMEFORMAT='%R %U %S' times crashes leaks
  crashes="$(count_findings "$target" crash timeout oom)"
  leaks="$(count_findings "$target" leak)"
  times="$( { time TMPDIR="$scratch" OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 \
    "$build/fuzz/fuzz_$target" \
    "${args[@]}" "$work" "$root/fuzz/corpus/$target" >"$out" 2>&1; } 2>&1 )" || status=$?
  local wall cpu execs cov
  wall="$(echo "$times" | tail -1 | awk '{printf "%.0f", $1}')"
  cpu="$(echo "$times" | tail -1 | awk '{printf "%.0f", $2 + $3}')"
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out" | grep -o '[0-9]*$' || echo 0)"
  cov="$(grep -o 'cov: [0-9]*' "$out" | tail -1 | grep -o '[0-9]*' || echo 0)"
  crashes=$(($(count_findings "$target" crash timeout oom) - crashes))
  leaks=$(($(count_findings "$target" leak) - leaks))
  printf '%s\t%s\t1\t%s\t%s\t%s\t%s\t%s\t%s\t%s\trun\n' "$(date -u +%FT%TZ)" "$target" "$wall" \
    "$cpu" "$execs" "$(find "$work" -type f | wc -l)" "$cov" "$crashes" "$leaks" >>"$record"
  tail -3 "$out"
  return "$status"
}

# The inputs of TARGET saved so far of the kinds named (crash, leak, timeout, oom); not
# libFuzzer's slow-unit reports (a unit over -report_slow_units seconds of wall time, which a
# campaign at nice 19 beside a build gets from waiting for the CPU).
count_findings() {
  local target="$1" n=0 kind
  shift
  for kind in "$@"; do
    n=$((n + $(find "$build/fuzz_findings" -name "$target-$kind-*" | wc -l)))
  done
  echo "$n"
}

# Every target's corpus (the build tree's, and what fuzz/reached.tar.xz held) merged into its
# minimal subset with the same coverage, packed reproducibly into fuzz/reached.tar.xz.
keep_corpora() {
  local stage="$build/reached" target
  rm -rf "$stage"
  mkdir -p "$stage"
  [ -f "$reached" ] && tar -xJf "$reached" -C "$stage"
  for target in "${targets[@]}"; do
    mkdir -p "$stage/$target" "$build/fuzz_corpus/$target"
    mv "$stage/$target" "$stage/$target.old"
    mkdir "$stage/$target"
    TMPDIR=/dev/shm OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0 "$build/fuzz/fuzz_$target" \
      -merge=1 "$stage/$target" "$stage/$target.old" "$build/fuzz_corpus/$target" \
      >"$build/merge-$target.log" 2>&1
    rm -rf "$stage/$target.old"
    log "$target: $(find "$stage/$target" -type f | wc -l) inputs kept"
  done
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - \
    "${targets[@]}" | xz -9 >"$reached"
  log "wrote $reached ($(du -h "$reached" | cut -f1))"
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
  keep)
    build_all
    keep_corpora
    ;;
  report)
    echo "| target | campaigns | CPU time | measured: CPU | measured: wall | executions | corpus |" \
      "coverage (cov) | crash inputs | leak inputs |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    awk -F'\t' '/^#/ { next } { n[$2] += $3; cpu[$2] += $5; ex[$2] += $6; corpus[$2] = $7;
                   if ($8 > cov[$2]) cov[$2] = $8; crash[$2] += $9
                   if ($10 != "-") { leak[$2] += $10; detected[$2] = 1 }
                   if ($11 != "summed") mcpu[$2] += $5
                   if ($11 == "run") mwall[$2] += $4 }
      END { for (t in n) printf "| %s | %d | %.0f min | %.0f min | %.0f min | %d | %d | %d | %d | %s |\n",
                                t, n[t], cpu[t] / 60, mcpu[t] / 60, mwall[t] / 60, ex[t], corpus[t],
                                cov[t], crash[t], detected[t] ? leak[t] : "-" }' \
      "$record" | sort
    ;;
  list) printf '%s\n' "${targets[@]}" ;;
  *) sed -n '2,20p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac
