#!/usr/bin/env bash
# Makes a Debian chroot that writes torch.export (.pt2) test fixtures:
#   make-export-chroot.sh DIR [SUITE]
# sid (the default): torch 2.14 (python3-torch), torchvision 0.27, Python 3.14; torch >= 2.8
# writes the PT2 archive layout. trixie: torch 2.6, Python 3.13, no torchvision; torch 2.1-2.7
# write the older layout (serialized_exported_program.json and torch.save pickles).
# Does nothing when DIR is already complete. Needs root (debootstrap, chroot). The Debian mirror
# is the one apt on this machine already uses, read from apt's own sources at run time (as
# make-peer-chroot.sh does). Exit status 3 means "cannot be made here" (not root, no mirror,
# no network): callers skip the tests that need it.
set -euo pipefail

if [[ $# -ne 1 && $# -ne 2 ]]; then
  echo "usage: $0 DIR [sid|trixie]" >&2
  exit 2
fi
DIR=$1
SUITE=${2:-sid}
case "$SUITE" in
  sid) PACKAGES=(python3-torch python3-torchvision python3-numpy) ;;
  trixie) PACKAGES=(python3-torch python3-numpy) ;;
  *) echo "$0: unknown suite $SUITE" >&2; exit 2 ;;
esac

[[ -e "$DIR/.complete" ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "$0: making the $SUITE chroot needs root (debootstrap)" >&2
  exit 3
fi

apt_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -e "$f" ]] && awk '/^URIs:/ {print $2; exit}' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -e "$f" ]] && awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' "$f"
  done
  return 0
}
MIRROR=$(apt_mirror | head -n 1) || true
if [[ -z "$MIRROR" ]]; then
  echo "$0: found no Debian mirror in apt's sources" >&2
  exit 3
fi

APT=(apt-get -y -q -o DPkg::Lock::Timeout=900)
if ! command -v debootstrap > /dev/null; then
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" install --no-install-recommends debootstrap > /dev/null ||
    { echo "$0: cannot install debootstrap" >&2; exit 3; }
fi

# Built aside and renamed at the end, so an interrupted run never leaves a half chroot behind.
WORK="$DIR.partial"
unmount_all() {
  local m
  for m in "$1/proc" "$1/kiln-fixtures"; do
    while mountpoint -q "$m" && umount "$m"; do :; done
  done
  return 0
}
trap 'unmount_all "$WORK"' EXIT
unmount_all "$WORK"
unmount_all "$DIR"
rm -rf "$WORK"
mkdir -p "$(dirname "$DIR")"
echo "making the $SUITE chroot in $DIR (once; a few minutes, about 2 GB)" >&2
start=$SECONDS
debootstrap --variant=minbase "$SUITE" "$WORK" "$MIRROR" > "$WORK.log" 2>&1 ||
  { tail -n 30 "$WORK.log" >&2; exit 3; }
mount --bind /proc "$WORK/proc"
# The sid Release file of a snapshot mirror may have expired; apt refuses it without this.
chroot "$WORK" env DEBIAN_FRONTEND=noninteractive apt-get -y -q \
  -o Acquire::Check-Valid-Until=false update >> "$WORK.log" 2>&1 ||
  { tail -n 30 "$WORK.log" >&2; exit 3; }
chroot "$WORK" env DEBIAN_FRONTEND=noninteractive apt-get -y -q install --no-install-recommends \
  "${PACKAGES[@]}" >> "$WORK.log" 2>&1 || { tail -n 30 "$WORK.log" >&2; exit 3; }
chroot "$WORK" apt-get clean
chroot "$WORK" python3 -c 'import torch; print("torch", torch.__version__)' >&2
unmount_all "$WORK"
touch "$WORK/.complete"
rm -rf "$DIR"
mv "$WORK" "$DIR"
rm -f "$WORK.log"
echo "made the $SUITE chroot in $((SECONDS - start)) s" >&2
