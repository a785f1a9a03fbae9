#!/usr/bin/env bash
# Runs a pytest selection beside a CPU hog, to show the tests wait on events and state, not on a quiet machine.
#
#   scripts/stress_tests.sh [-j BURNERS] [-t SECONDS] [-r ROUNDS] -- PYTEST_ARGS...
#   scripts/stress_tests.sh -- tests/test_warm_up.py tests/ingest/test_check.py
#
# BURNERS (default 2, one per core of a two-core machine) Python processes spin on the CPU for at most SECONDS
# (default 1800) each, so a killed script leaves nothing burning for long; they are stopped when the tests end,
# however they end.  ROUNDS (default 1) runs the selection that many times in a row, stopping at the first
# failure.  The exit status is pytest's.  PYTHON picks the interpreter (default: .venv/bin/python, else python3).
set -u

burners=2
seconds=1800
rounds=1
while getopts "j:t:r:" opt; do
    case "$opt" in
        j) burners="$OPTARG" ;;
        t) seconds="$OPTARG" ;;
        r) rounds="$OPTARG" ;;
        *) echo "usage: $0 [-j BURNERS] [-t SECONDS] [-r ROUNDS] -- PYTEST_ARGS..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
if [ $# -eq 0 ]; then
    echo "usage: $0 [-j BURNERS] [-t SECONDS] [-r ROUNDS] -- PYTEST_ARGS...  (name the tests: never the whole" \
         "suite on a shared machine)" >&2
    exit 2
fi

cd "$(dirname "$0")/.."
python="${PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi

pids=()
stop_burners() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null
    done
    pids=()
}
trap stop_burners EXIT
trap 'exit 130' INT TERM

# Each burner ends by itself after $seconds, should this script be killed before its trap runs.
for _ in $(seq "$burners"); do
    "$python" -c "import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    sum(i * i for i in range(100_000))" "$seconds" &
    pids+=($!)
done
echo "stress: ${#pids[@]} CPU burner(s) for at most ${seconds}s (pids ${pids[*]}); load: $(cut -d' ' -f1-3 /proc/loadavg)"

status=0
started=$(date +%s)
for round in $(seq "$rounds"); do
    echo "stress: round $round of $rounds: $python -m pytest $*"
    "$python" -m pytest "$@"
    status=$?
    [ "$status" -ne 0 ] && break
done
echo "stress: pytest exit $status after $(( $(date +%s) - started ))s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
