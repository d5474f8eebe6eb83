#!/usr/bin/env bash
# A job that outlives one device call: a GPU session's work (build, tests, benchmarks) runs in
# its own process session, which the device tool leaves running between calls while the machine
# stays warm, so one job can use more than one call's ten minutes with no rebuild.
#
#   scripts/detach.sh start DIR CMD...        CMD in the background, its output in DIR/job.log;
#                                             DIR/done holds its exit status when it ends
#   scripts/detach.sh wait DIR SECONDS TARBALL  waits for DIR/done at most SECONDS, then packs
#                                             DIR's files under 2 MB into TARBALL (.tar.gz)
set -uo pipefail
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
verb=$1
dir=$2
shift 2
case "$verb" in
  start)
    [ $# -ge 1 ] || usage
    mkdir -p "$dir"
    rm -f "$dir/done"
    setsid nohup bash -c '"$@" >"$0/job.log" 2>&1; echo $? >"$0/done"' "$dir" "$@" \
      </dev/null >/dev/null 2>&1 &
    echo "detach: started in $dir (pid $!)"
    ;;
  wait)
    [ $# -ge 2 ] || usage
    seconds=$1
    tarball=$2
    end=$(($(date +%s) + seconds))
    while [ ! -f "$dir/done" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
    if [ -f "$dir/done" ]; then echo "detach: done, rc $(cat "$dir/done")"; else echo "detach: still running"; fi
    (cd "$dir" && find . -type f -size -2M -print0 | tar czf "$tarball" --null -T -)
    tail -n 30 "$dir/job.log"
    ;;
  *) usage ;;
esac
