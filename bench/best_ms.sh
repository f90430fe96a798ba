# best_ms: the best of 3 wall times of a command, in ms (sourced by the
# benchmark scripts of this folder).
best_ms() {
  local best=999999999
  for _ in 1 2 3; do
    local t0 t1
    t0=$(date +%s%N)
    "$@" > /dev/null 2>&1
    t1=$(date +%s%N)
    local ms=$(( (t1 - t0) / 1000000 ))
    (( ms < best )) && best=$ms
  done
  echo "$best"
}
