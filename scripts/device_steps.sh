# Shared by scripts/device-check.sh and scripts/device-tune.sh (sourced, not run): a run of named steps on a
# lent GPU machine, each under a timeout within the run's budget, its output in logs/NAME.log and its outcome in
# steps.tsv, the summary and the archive rewritten after every step, so that what finished comes back even if
# the whole run is cut short. The sourcing script sets
#   scratch (a temporary folder), work (the run's folder in it, named $archive), out (where results go), log
#   (the run's log), deadline (in bash's $SECONDS), archive (the archive's base name: device-check), and
#   archive_exclude (a tar --exclude pattern for what to leave out of an archive that would pass 15 MiB),
# and defines refresh, which rewrites its summary from steps.tsv and whatever the steps left.
# shellcheck shell=bash disable=SC2154  # the variables above are the sourcing script's

record_step() {  # record_step NAME STATUS SECONDS COMMAND
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$work/steps.tsv"
}

# The steps table alone, as the summary, when the script's own summary could not be written.
steps_table() {  # steps_table TITLE
  { echo "# $1"; echo
    column -t -s $'\t' "$work/steps.tsv" 2>/dev/null || cat "$work/steps.tsv"; } > "$work/summary.md"
}

pack() {  # OUT/$archive.tar.gz, under 16 MiB: without $archive_exclude if it would not fit
  cp -f "$log" "$work/log.txt" 2>/dev/null
  local tarball="$out/$archive.tar.gz"
  tar -czf "$tarball.part" -C "$scratch" "$archive" && mv -f "$tarball.part" "$tarball"
  if [ -f "$tarball" ] && [ "$(stat -c %s "$tarball")" -gt $((15 << 20)) ]; then
    tar -czf "$tarball.part" --exclude="$archive_exclude" -C "$scratch" "$archive" && mv -f "$tarball.part" "$tarball"
  fi
}

# step NAME SECONDS [--stdout FILE] COMMAND...: runs COMMAND under a timeout (at most what is left of the
# budget), its output in logs/NAME.log (stdout in FILE with --stdout), and records the outcome.
running="" running_name=""  # the step being run, stopped by stop_running_step
step() {
  local name=$1 limit=$2 stdout="" rc status began left
  shift 2
  if [ "${1:-}" = "--stdout" ]; then stdout=$2; shift 2; fi
  left=$((deadline - SECONDS))
  if [ "$left" -lt 10 ]; then
    echo "== $name: skipped, out of time"
    record_step "$name" "skipped: out of time" 0 "$*"
    return 125
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (at most ${limit}s): $*"
  began=$SECONDS
  # In the background with `wait`, so that an INT or TERM is handled at once (finish stops the step).
  if [ -n "$stdout" ]; then
    timeout -k 10 "$limit" "$@" > "$stdout" 2> "$work/logs/$name.log" &
  else
    timeout -k 10 "$limit" "$@" > "$work/logs/$name.log" 2>&1 &
  fi
  running=$! running_name=$name
  wait "$running"
  rc=$?
  running=""
  case $rc in
    0) status=pass
       # faprobe's own words for a run where nothing was measured (no GPU, or a CPU-only build)
       if grep -q ' records: 0 ok, 0 mismatch, 0 failed' "$work/logs/$name.log"; then status="pass, but no case ran"; fi
       if grep -q -- '--save: nothing saved' "$work/logs/$name.log"; then status="pass, but nothing saved"; fi ;;
    124 | 137) status="TIMEOUT after ${limit}s" ;;
    126 | 127) status="FAIL: cannot run (exit $rc)" ;;
    *) status="FAIL (exit $rc)" ;;
  esac
  record_step "$name" "$status" $((SECONDS - began)) "$*"
  tail -n 4 "$work/logs/$name.log" | sed 's/^/   | /'
  echo "   -> $status ($((SECONDS - began))s)"
  refresh
  pack
  return $rc
}

stop_running_step() {  # the step under way, if any, stopped and recorded as interrupted (for an exit trap)
  if [ -n "$running" ]; then
    kill -TERM "$running" 2> /dev/null
    wait "$running" 2> /dev/null
    record_step "$running_name" "interrupted" 0 ""
  fi
}
