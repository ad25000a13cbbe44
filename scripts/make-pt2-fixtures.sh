#!/usr/bin/env bash
# Writes the torch.export (.pt2) fixtures with torch 2.14 in a Debian sid chroot, and with
# LEGACY_CHROOT_DIR those of torch 2.6's older layout in a Debian trixie chroot:
#   make-pt2-fixtures.sh CHROOT_DIR OUT_DIR [LEGACY_CHROOT_DIR]
# Makes each chroot first when missing (scripts/make-export-chroot.sh; cached in its directory),
# then runs tests/pt2/make_pt2_fixtures.py inside it with the output bound at /kiln-fixtures:
# OUT_DIR, and OUT_DIR/legacy (--legacy). Does nothing for a directory whose manifest.json is
# newer than the generator. Exit status 3: the sid chroot cannot be made here (not root, no
# mirror, no network); callers skip their tests. When only the trixie chroot cannot be made,
# OUT_DIR/legacy/SKIP_REASON says why and the legacy fixtures are skipped. KILN_PT2_GENERATOR
# names another generator (tests/pt2/make_pt2_zoo.py: `make test-zoo-pt2`), given OUT_DIR
# and the model names in KILN_PT2_ONLY.
set -euo pipefail

if [[ $# -ne 2 && $# -ne 3 ]]; then
  echo "usage: $0 CHROOT_DIR OUT_DIR [LEGACY_CHROOT_DIR]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
GEN=${KILN_PT2_GENERATOR:-$HERE/../tests/pt2/make_pt2_fixtures.py}

# generate CHROOT OUT [--legacy]: runs the generator in CHROOT, writing OUT.
# (GEN_CHROOT is global: the EXIT trap may run after the function returned.)
cleanup() {
  local m
  for m in "$GEN_CHROOT/kiln-fixtures" "$GEN_CHROOT/proc"; do
    while mountpoint -q "$m" && umount "$m"; do :; done
  done
}
generate() {
  GEN_CHROOT=$1
  local chroot=$1 out=$2
  shift 2
  mkdir -p "$out" "$chroot/kiln-fixtures"
  out=$(cd "$out" && pwd)
  trap cleanup EXIT
  mount --bind /proc "$chroot/proc"
  mount --bind "$out" "$chroot/kiln-fixtures"
  # A new file rather than one written over: the chroot may share its files with another copy
  # of it (cp -al).
  # (The zoo's generator imports gen_zoo.py and torch_fixtures.py from beside it.)
  local f
  for f in "$GEN" "$HERE/../tests/parity/gen_zoo.py" "$HERE/../tests/support/torch_fixtures.py"; do
    rm -f "$chroot/tmp/$(basename "$f")"
    cp "$f" "$chroot/tmp/"
  done
  rm -f "$out/manifest.json"
  local start=$SECONDS
  # shellcheck disable=SC2086  # KILN_PT2_ONLY: model names, split at spaces
  chroot "$chroot" env OMP_NUM_THREADS=2 python3 "/tmp/$(basename "$GEN")" "$@" /kiln-fixtures \
    ${KILN_PT2_ONLY:-}
  echo "wrote the .pt2 fixtures $* in $((SECONDS - start)) s" >&2
  cleanup
  trap - EXIT
}

# (The zoo's generator skips the models it has written itself.)
fresh() { [[ -z "${KILN_PT2_GENERATOR:-}" && -e "$1/manifest.json" && "$1/manifest.json" -nt "$GEN" ]]; }

CHROOT=$1
OUT=$2
# The trixie chroot is made in the background while the sid one is made and used: both spend
# most of their time downloading, and one after the other they doubled the fixture step.
LEGACY_PID=
if [[ $# -eq 3 ]] && ! fresh "$OUT/legacy"; then
  LEGACY=$3
  mkdir -p "$OUT/legacy"
  rm -f "$OUT/legacy/SKIP_REASON"
  "$HERE/make-export-chroot.sh" "$LEGACY" trixie 2> "$OUT/legacy/chroot.log" &
  LEGACY_PID=$!
fi
if ! fresh "$OUT"; then
  rc=0
  "$HERE/make-export-chroot.sh" "$CHROOT" sid || rc=$?
  if [[ $rc -ne 0 ]]; then
    [[ -n "$LEGACY_PID" ]] && wait "$LEGACY_PID" || true
    exit "$rc"
  fi
  generate "$CHROOT" "$OUT"
fi
if [[ -n "$LEGACY_PID" ]]; then
  rc=0
  wait "$LEGACY_PID" || rc=$?
  cat "$OUT/legacy/chroot.log" >&2
  if [[ $rc -eq 3 ]]; then
    tail -n 3 "$OUT/legacy/chroot.log" > "$OUT/legacy/SKIP_REASON"
    exit 0
  elif [[ $rc -ne 0 ]]; then
    exit "$rc"
  fi
  generate "$LEGACY" "$OUT/legacy" --legacy
fi
