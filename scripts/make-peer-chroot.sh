#!/usr/bin/env bash
# Makes the Debian trixie chroot that `make bench` runs its peer engines in: ONNX Runtime 1.21
# (python3-onnxruntime) and torch 2.6 (python3-torch, for the FLOP count), Python 3.13.
#   make-peer-chroot.sh DIR
# Does nothing when DIR is already complete. Needs root (debootstrap, chroot). The Debian mirror
# is the one apt on this machine already uses, read from apt's own sources at run time.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
DIR=$1
SUITE=trixie
PACKAGES=(python3-onnxruntime python3-numpy python3-torch)

[[ -e "$DIR/.complete" ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "$0: making the $SUITE chroot needs root (debootstrap)" >&2
  exit 1
fi

# The first mirror apt is configured with: deb822 sources first, then one-line sources.
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
  exit 1
fi

# Waits for another apt/dpkg (someone else installing) instead of failing on the lock.
APT=(apt-get -y -q -o DPkg::Lock::Timeout=900)
if ! command -v debootstrap > /dev/null; then
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" install --no-install-recommends debootstrap > /dev/null
fi

# Built aside and renamed at the end, so an interrupted run never leaves a half chroot behind.
WORK="$DIR.partial"
unmount_all() {  # what this script or an interrupted benchmark left mounted in $1
  local m
  for m in "$1/proc" "$1/kiln-bench"; do
    while mountpoint -q "$m" && umount "$m"; do :; done
  done
  return 0
}
trap 'unmount_all "$WORK"' EXIT
unmount_all "$WORK"
unmount_all "$DIR"
rm -rf "$WORK"
mkdir -p "$(dirname "$DIR")"
echo "making the $SUITE chroot in $DIR (once; a few minutes, about 4 GB)" >&2
debootstrap --variant=minbase "$SUITE" "$WORK" "$MIRROR" > "$WORK.log" 2>&1 ||
  { cat "$WORK.log" >&2; exit 1; }
mount --bind /proc "$WORK/proc"
chroot "$WORK" env DEBIAN_FRONTEND=noninteractive apt-get -y -q update >> "$WORK.log" 2>&1
chroot "$WORK" env DEBIAN_FRONTEND=noninteractive apt-get -y -q install --no-install-recommends \
  "${PACKAGES[@]}" >> "$WORK.log" 2>&1 || { tail -n 30 "$WORK.log" >&2; exit 1; }
chroot "$WORK" apt-get clean
chroot "$WORK" python3 -c 'import onnxruntime, torch, numpy; print("onnxruntime", onnxruntime.__version__, "torch", torch.__version__)' >&2
unmount_all "$WORK"
touch "$WORK/.complete"
rm -rf "$DIR"
mv "$WORK" "$DIR"
rm -f "$WORK.log"
