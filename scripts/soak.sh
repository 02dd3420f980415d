#!/usr/bin/env bash
# Soak test (not part of CI): for MINUTES minutes, several `solewriter holder` processes
# acquire and publish one target in a loop, a producer submits with rising watermarks, and a
# `solewriter reader` checks every document it sees, while a chaos loop freezes holders
# (SIGSTOP, then SIGCONT after up to 1.5 s, longer than the 300 ms lease) and kills them
# (SIGKILL). Every holder answer is appended to an audit log as `<ns> <event> <epoch> <who>`.
#
# At the end it checks, and prints as `soak: ...`:
#   stale writes  a publication reported under an epoch other than its holder's own grant,
#                 or one whose publish started after a higher epoch was granted (audit
#                 log), or a final current.json whose epoch is not a granted epoch at least
#                 as high as every reported publication;
#   torn reads    the reader's `checked <reads> <invalid> <regressions>` line;
#   lost          submissions that printed success with a watermark above the store's final
#                 watermark for the channel.
#   anomalies     a holder answer other than published / fenced / expired / busy (an error,
#                 possibly after current.json was already replaced).
# Exits 1 if any of these is not zero.
#
# usage: scripts/soak.sh MINUTES [HOLDERS]     (builds target/debug/solewriter first)
set -euo pipefail

minutes=${1:?usage: scripts/soak.sh MINUTES [HOLDERS]}
holders=${2:-3}
cd "$(dirname "$0")/.."
cargo build --quiet --bin solewriter
bin=$PWD/target/debug/solewriter
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
cfg=$work/solewriter.toml
cat >"$cfg" <<EOF
store = "store.sqlite"
runtime_root = "runtime"
lease_ttl_ms = 300
busy_timeout_ms = 2000

[[channels]]
name = "computed-route"
owner = "router"
envelope_schema = "computed-route.v1"
max_envelope_bytes = 4096
EOF
tuple='{"schemaVersion":"1","capability":"hook-projection","agentId":"soak","harnessType":"claude-code","instanceKeyDigest":"inst-1","workspaceKeyDigest":"ws-1","projectionKind":"live-lane"}'
sw() { (cd "$work" && "$bin" --config "$cfg" "$@"); }
sw init >/dev/null
target=$(sw admit "$tuple")
audit=$work/audit.log
: >"$audit"
end=$(($(date +%s) + minutes * 60))
log() { echo "$(date +%s%N) $*" >>"$audit"; }

holder_loop() {
  local name=$1 answer
  while (($(date +%s) < end)); do
    coproc H { exec "$bin" holder --config "$cfg" --target "$target" --instance "$name"; }
    local pid=$H_PID in=${H[1]} out=${H[0]}
    echo "$pid" >"$work/pid.$name"
    for _ in $(seq $((RANDOM % 8 + 1))); do
      echo acquire >&"$in" 2>/dev/null || break
      read -r -t 10 answer <&"$out" || break
      set -- $answer
      if [[ ${1:-} == acquired ]]; then
        log granted "$2" "$name"
        log publish-start "$2" "$name"
        echo publish >&"$in" 2>/dev/null || break
        read -r -t 10 answer <&"$out" || break
        set -- $answer
        case ${1:-} in
          published) log published "$2" "$name" ;;
          fenced | expired | busy) log refused "$*" "$name" ;;
          *) log anomaly "$*" "$name" ;;  # e.g. an error after current.json was replaced
        esac
      else
        sleep 0.0$((RANDOM % 9 + 1))
      fi
    done
    echo quit >&"$in" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

submit_loop() {
  local w=0
  while (($(date +%s) < end)); do
    w=$((w + 1))
    if sw submit --producer router --target "$target" --channel computed-route \
      --watermark "$w" --envelope "{\"schema\":\"computed-route.v1\",\"notAuthority\":true,\"w\":$w}" \
      --captured-at "$(date +%s)000" --expires-in-ms 3600000 >/dev/null 2>&1; then
      echo "$w" >>"$work/submitted"
    fi
    sleep 0.0$((RANDOM % 9 + 1))
  done
}

chaos_loop() {
  local stops=0 kills=0 pid
  while (($(date +%s) < end)); do
    sleep 0.$((RANDOM % 5 + 2))
    pid=$(cat "$work/pid.h$((RANDOM % holders))" 2>/dev/null) || continue
    if ((RANDOM % 4 == 0)); then
      kill -KILL "$pid" 2>/dev/null && kills=$((kills + 1))
    else
      kill -STOP "$pid" 2>/dev/null && stops=$((stops + 1))
      sleep "$((RANDOM % 2)).$((RANDOM % 5))"
      kill -CONT "$pid" 2>/dev/null || true
    fi
  done
  echo "$stops $kills" >"$work/chaos"
}

coproc R { exec "$bin" reader --config "$cfg" --target "$target"; }
reader_pid=$R_PID reader_in=${R[1]} reader_out=${R[0]}
for i in $(seq 0 $((holders - 1))); do holder_loop "h$i" 2>/dev/null & done
submit_loop &
chaos_loop &
wait $(jobs -p | grep -v "^$reader_pid\$") 2>/dev/null || true
exec {reader_in}>&-
checked=$(grep '^checked' <&"$reader_out" || true)
wait "$reader_pid" || true

# Stale writes: a publication reported with an epoch other than its holder's own grant (a
# holder writing under someone else's epoch), or one whose publish started after a higher
# epoch had been granted.
stale=$(sort -n "$audit" | awk '
  $2 == "granted" { if ($3 > max) max = $3; own[$4] = $3 }
  $2 == "publish-start" { started[$4] = max }
  $2 == "published" && ($3 != own[$4] || started[$4] > own[$4]) { stale++ }
  END { print stale + 0 }')
granted_max=$(awk '$2 == "granted" && $3 > m { m = $3 } END { print m + 0 }' "$audit")
published_max=$(awk '$2 == "published" && $3 > m { m = $3 } END { print m + 0 }' "$audit")
final_epoch=$(sw read "$target" --json | sed -n 's/.*"fencingEpoch":\([0-9]*\).*/\1/p')
if ((final_epoch < published_max || final_epoch > granted_max)); then stale=$((stale + 1)); fi
# Lost submissions: a reported success above the final stored watermark.
final_wm=$(sw inspect --json | sed -n 's/.*"sourceWatermark":\([0-9]*\).*/\1/p')
lost=$(awk -v f="$final_wm" '$1 > f { n++ } END { print n + 0 }' "$work/submitted")
read -r _ reads invalid regressions <<<"$checked"
read -r stops kills <"$work/chaos"
echo "soak: ${minutes} min, ${holders} holders, work dir $work"
echo "soak: grants $(grep -c ' granted ' "$audit"), publications $(grep -c ' published ' "$audit"), refused $(grep -c ' refused ' "$audit"), final epoch $final_epoch (max granted $granted_max, max reported published $published_max)"
echo "soak: submissions $(wc -l <"$work/submitted") (final watermark $final_wm), SIGSTOP $stops, SIGKILL $kills, reads $reads"
anomalies=$(grep -c ' anomaly ' "$audit" || true)
echo "soak: stale writes $stale, torn reads $invalid (regressions $regressions), lost submissions $lost, holder anomalies $anomalies"
((stale == 0 && invalid == 0 && regressions == 0 && lost == 0 && anomalies == 0))
