#!/usr/bin/env bash
# Many-target load run (not part of CI): for SECONDS seconds, PUBLISHERS publisher processes
# publish over TARGETS targets of one store, PRODUCERS producer loops submit to random
# targets with rising watermarks, and one `solewriter reader` process per target checks every
# document it sees. Each publisher is a loop of `solewriter holder` processes: a holder is
# started for a random target, acquires and publishes it one to four times, and quits; the
# next one picks another target. Every holder answer is appended to an audit log as
# `<ns> <event> <target> <epoch> <who>`.
#
# At the end every target is published once more, and the run checks, printing `load: ...`:
#   stale writes  a publication reported under an epoch other than its holder's own grant, or
#                 one whose publish started after a higher epoch of its target was granted;
#   torn reads    the sum of the readers' `checked <reads> <invalid> <regressions>` lines
#                 (invalid documents and epoch regressions);
#   lost          a submission that printed success with a watermark above the final document's
#                 watermark for its target, or a final document whose watermark is not the
#                 store's (the last publication lists exactly the committed rows);
#   anomalies     a holder answer other than acquired / held / busy / published / fenced /
#                 expired.
# It also prints the publications per second. Exits 1 if any count above is not zero.
#
# usage: scripts/many-targets.sh [SECONDS] [PUBLISHERS] [TARGETS] [PRODUCERS]
#        (defaults 60 8 64 2; builds target/release/solewriter first)
set -euo pipefail

seconds=${1:-60}
publishers=${2:-8}
targets=${3:-64}
producers=${4:-2}
cd "$(dirname "$0")/.."
cargo build --quiet --release --bin solewriter
bin=$PWD/target/release/solewriter
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
cfg=$work/solewriter.toml
cat >"$cfg" <<EOF
store = "store.sqlite"
runtime_root = "runtime"
lease_ttl_ms = 5000
busy_timeout_ms = 5000

[[channels]]
name = "computed-route"
owner = "router"
envelope_schema = "computed-route.v1"
max_envelope_bytes = 4096
EOF
sw() { (cd "$work" && "$bin" --config "$cfg" "$@"); }
sw init >/dev/null
for t in $(seq 0 $((targets - 1))); do
  sw admit "{\"schemaVersion\":\"1\",\"capability\":\"hook-projection\",\"agentId\":\"agent-$t\",\"harnessType\":\"claude-code\",\"instanceKeyDigest\":\"inst-1\",\"workspaceKeyDigest\":\"ws-1\",\"projectionKind\":\"live-lane\"}" >>"$work/targets"
done
mapfile -t ids <"$work/targets"
audit=$work/audit.log
: >"$audit"
end=$(($(date +%s) + seconds))
log() { echo "$(date +%s%N) $*" >>"$audit"; }

publisher_loop() {
  local name=$1 answer target
  while (($(date +%s) < end)); do
    target=${ids[RANDOM % targets]}
    coproc H { exec "$bin" holder --config "$cfg" --target "$target" --instance "$name"; }
    local pid=$H_PID in=${H[1]} out=${H[0]}
    for _ in $(seq $((RANDOM % 4 + 1))); do
      echo acquire >&"$in" 2>/dev/null || break
      read -r -t 60 answer <&"$out" || break
      set -- $answer
      case ${1:-} in
        acquired)
          log granted "$target" "$2" "$name"
          log publish-start "$target" "$2" "$name"
          echo publish >&"$in" 2>/dev/null || break
          read -r -t 60 answer <&"$out" || break
          set -- $answer
          case ${1:-} in
            published) log published "$target" "$2" "$name" ;;
            fenced | expired | busy) log refused "$target" "$*" "$name" ;;
            *) log anomaly "$target" "$*" "$name" ;;
          esac
          ;;
        held | busy) log waited "$target" "$*" "$name" ;;
        *) log anomaly "$target" "$*" "$name" ;;
      esac
    done
    echo quit >&"$in" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

producer_loop() {
  local p=$1 w=0 t
  while (($(date +%s) < end)); do
    w=$((w + 1))
    # Producer p owns the watermarks w * PRODUCERS + p, so watermarks rise on every target.
    t=$((RANDOM % targets))
    if sw submit --producer router --target "${ids[t]}" --channel computed-route \
      --watermark "$((w * producers + p))" \
      --envelope "{\"schema\":\"computed-route.v1\",\"notAuthority\":true,\"w\":$w}" \
      --captured-at "$(date +%s)000" --expires-in-ms 3600000 >/dev/null 2>&1; then
      echo "${ids[t]} $((w * producers + p))" >>"$work/submitted"
    fi
  done
}

# One reader per target; each reads until its stdin (a FIFO this script holds open) closes.
# Every reader starts before any FIFO is opened for writing, so no reader inherits another's
# write end (which would keep that FIFO open after this script closes its own).
declare -a reader_pids reader_ins
for t in $(seq 0 $((targets - 1))); do
  mkfifo "$work/in.$t"
  "$bin" reader --config "$cfg" --target "${ids[t]}" <"$work/in.$t" >"$work/reader.$t" &
  reader_pids[t]=$!
done
for t in $(seq 0 $((targets - 1))); do
  exec {fd}>"$work/in.$t"
  reader_ins[t]=$fd
done
started=$(date +%s%N)
pids=()
for i in $(seq 0 $((publishers - 1))); do publisher_loop "p$i" 2>/dev/null & pids+=($!); done
for i in $(seq 0 $((producers - 1))); do producer_loop "$i" & pids+=($!); done
wait "${pids[@]}" 2>/dev/null || true
elapsed_ms=$((($(date +%s%N) - started) / 1000000))

# Every target once more: its document must list exactly the committed rows.
for id in "${ids[@]}"; do sw publish "$id" --instance final >/dev/null; done
reads=0 invalid=0 regressions=0
for t in $(seq 0 $((targets - 1))); do
  fd=${reader_ins[t]}
  eval "exec $fd>&-"
  wait "${reader_pids[t]}" 2>/dev/null || true
  read -r _ r i g < <(grep '^checked' "$work/reader.$t" || echo "checked 0 1 0")
  reads=$((reads + r)) invalid=$((invalid + i)) regressions=$((regressions + g))
done

stale=$(sort -n "$audit" | awk '
  $2 == "granted" { if ($4 > max[$3]) max[$3] = $4; own[$5] = $4 }
  $2 == "publish-start" { started[$5] = max[$3] }
  $2 == "published" && ($4 != own[$5] || started[$5] > own[$5]) { stale++ }
  END { print stale + 0 }')
lost=0
for id in "${ids[@]}"; do
  doc_wm=$(sw read "$id" --json | sed -n 's/.*"sourceWatermark":\([0-9]*\).*/\1/p')
  store_wm=$(sw inspect "$id" --json | sed -n 's/.*"sourceWatermark":\([0-9]*\).*/\1/p')
  [[ ${doc_wm:-0} == "${store_wm:-0}" ]] || lost=$((lost + 1))
  lost=$((lost + $(awk -v id="$id" -v f="${doc_wm:-0}" '$1 == id && $2 > f { n++ } END { print n + 0 }' "$work/submitted" 2>/dev/null || echo 0)))
done
publications=$(grep -c ' published ' "$audit" || true)
anomalies=$(grep -c ' anomaly ' "$audit" || true)
echo "load: ${seconds} s, ${publishers} publisher processes, ${targets} targets, ${producers} producers, work dir $work"
echo "load: grants $(grep -c ' granted ' "$audit" || true), publications $publications ($((publications * 1000 / (elapsed_ms > 0 ? elapsed_ms : 1))) per s), refused $(grep -c ' refused ' "$audit" || true), waited (held or busy) $(grep -c ' waited ' "$audit" || true)"
echo "load: submissions $(wc -l <"$work/submitted" 2>/dev/null || echo 0), reads $reads"
echo "load: stale writes $stale, torn reads $invalid (regressions $regressions), lost submissions $lost, holder anomalies $anomalies"
((stale == 0 && invalid == 0 && regressions == 0 && lost == 0 && anomalies == 0))
