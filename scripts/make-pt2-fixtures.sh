#!/usr/bin/env bash
# Writes the torch.export (.pt2) fixtures with torch 2.14 in a Debian sid chroot:
#   make-pt2-fixtures.sh CHROOT_DIR OUT_DIR
# Makes the chroot first when missing (scripts/make-export-chroot.sh; cached in CHROOT_DIR),
# then runs tests/pt2/make_pt2_fixtures.py inside it with OUT_DIR bound at /kiln-fixtures.
# Does nothing when OUT_DIR/manifest.json is newer than the generator. Exit status 3: the
# chroot cannot be made here (not root, no mirror, no network); callers skip their tests.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 CHROOT_DIR OUT_DIR" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
CHROOT=$1
OUT=$2
GEN="$HERE/../tests/pt2/make_pt2_fixtures.py"

if [[ -e "$OUT/manifest.json" && "$OUT/manifest.json" -nt "$GEN" ]]; then
  exit 0
fi
"$HERE/make-export-chroot.sh" "$CHROOT"

mkdir -p "$OUT" "$CHROOT/kiln-fixtures"
OUT=$(cd "$OUT" && pwd)
cleanup() {
  local m
  for m in "$CHROOT/kiln-fixtures" "$CHROOT/proc"; do
    while mountpoint -q "$m" && umount "$m"; do :; done
  done
}
trap cleanup EXIT
mount --bind /proc "$CHROOT/proc"
mount --bind "$OUT" "$CHROOT/kiln-fixtures"
# A new file rather than one written over: the chroot may share its files with another copy
# of it (cp -al).
rm -f "$CHROOT/tmp/make_pt2_fixtures.py"
cp "$GEN" "$CHROOT/tmp/make_pt2_fixtures.py"
rm -f "$OUT/manifest.json"
start=$SECONDS
chroot "$CHROOT" env OMP_NUM_THREADS=2 python3 /tmp/make_pt2_fixtures.py /kiln-fixtures
echo "wrote the .pt2 fixtures in $((SECONDS - start)) s" >&2
