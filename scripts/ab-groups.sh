# Sourced by scripts/ab.sh and scripts/ab-env.sh: split_bench_groups ARGS... fills the array
# `groups` with one string per `::`-separated run of `floe bench` options (no spaces inside an
# option), each timed as one bench call in every round.
split_bench_groups() {
  groups=()
  local group="" a
  for a in "$@"; do
    if [ "$a" = "::" ]; then groups+=("$group"); group=""; else group+="${group:+ }$a"; fi
  done
  groups+=("$group")
}
