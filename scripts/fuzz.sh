#!/usr/bin/env bash
# Fuzzes lt's parsers and request handlers with libFuzzer (Sources/FuzzTargets, driver lt-fuzz),
# built with AddressSanitizer in its own build folder (.build-fuzz).
#
#   scripts/fuzz.sh                 every harness for 60 s each
#   scripts/fuzz.sh 600 json http   these harnesses for 600 s each
#
# Harnesses: json, selector, regex ($regex patterns and subjects: linear work), wkt, geo, multipart, revs, http (the database API's handler end
# to end), app (the application API's), control (the control socket's routes), config (lt serve's configuration file), prometheus (the
# metrics text lt doctor reads from any server), rewrite (declarative _rewrite rules and paths), history (the history file readers:
# read whole and in pieces alike), archive (ZIP archives of histories, likewise). Each starts from Tests/Fuzz/corpus/<harness> and
# writes what it learns to .build-fuzz/corpus/<harness> (the committed corpus is not changed).
# A crash stops the run, leaves the input in .build-fuzz/crashes/<harness>/ and exits 1: copy
# it into Tests/Fuzz/corpus/<harness>/ once fixed, and `swift test` replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(json selector regex wkt geo multipart revs http app control config prometheus rewrite history archive)

echo "building lt-fuzz with libFuzzer and AddressSanitizer (.build-fuzz)" >&2
swift build --product lt-fuzz --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library >&2
binary="$(swift build --product lt-fuzz --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library --show-bin-path)/lt-fuzz"

failed=0
passed=0
failures=0
for harness in "${harnesses[@]}"; do
  corpus=".build-fuzz/corpus/$harness"
  crashes=".build-fuzz/crashes/$harness"
  work="$(mktemp -d)"
  mkdir -p "$corpus" "$crashes"
  echo "fuzzing $harness for ${seconds}s" >&2
  # The http and app harnesses keep their server's files in TMPDIR: a fresh one per run.
  if LT_FUZZ_TARGET="$harness" TMPDIR="$work" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
      "$binary" "$corpus" "Tests/Fuzz/corpus/$harness" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
      -max_len=65536 -artifact_prefix="$crashes/" -print_final_stats=1 > "$work/log" 2>&1; then
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$work/log" | tail -3 | sed "s/^/  $harness: /" >&2
    passed=$((passed + 1))
  else
    failed=1
    failures=$((failures + 1))
    echo "FAILED: $harness (the input is in $crashes/)" >&2
    grep -E "lt-fuzz finding|ERROR: AddressSanitizer|Fatal error|SUMMARY|deadly signal|Test unit written" "$work/log" | head -8 >&2
  fi
  rm -rf "$work"
done
echo "fuzz: $passed passed, $failures failed"
exit "$failed"
