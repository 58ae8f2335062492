# shellcheck shell=bash
# Shared by lab/run-all.sh (`make test`) and lab/check.sh (`make check`): a step timed and recorded, and the
# table of every step at the end. Sourced, not run.

# step_to FILE NAME COMMAND...: runs COMMAND, prints its banners and appends "NAME RC SECONDS" to FILE
step_to() {
  local file=$1 name=$2; shift 2
  echo "===== $name: $*"
  local t0=$SECONDS
  "$@"; local rc=$?
  echo "$name $rc $((SECONDS - t0))" >> "$file"
  echo "===== $name: $([ "$rc" = 0 ] && echo ok || echo "FAILED (rc $rc)") in $((SECONDS - t0)) s"
  return 0
}

# print_table TOTAL_SECONDS FILE...: one row a step of every FILE (a lane each, in order), the total, and
# how many passed; returns 1 when a step failed or a FILE is missing (its lane never ran)
print_table() {
  local total=$1; shift
  local failed=0 passed=0 file name rc secs
  printf '\n%-28s %-12s %8s  %s\n' STEP LANE SECONDS RESULT
  for file in "$@"; do
    if [ ! -f "$file" ]; then
      printf '%-28s %-12s %8s  %s\n' '(none)' "$(basename "$file")" - 'FAILED (no step ran)'
      failed=$((failed + 1)); continue
    fi
    local lane
    lane=$(basename "$file")
    while read -r name rc secs; do
      printf '%-28s %-12s %8s  %s\n' "$name" "$lane" "$secs" "$([ "$rc" = 0 ] && echo ok || echo FAILED)"
      if [ "$rc" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    done < "$file"
  done
  printf '%-28s %-12s %8s\n' total '' "$total"
  echo "steps: ${passed} passed, ${failed} failed"
  [ "$failed" = 0 ]
}
