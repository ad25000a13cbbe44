# Sourced by scripts/podman-setup.sh and scripts/docker-setup.sh: makes the Debian bookworm base image the
# container tests build on, with debootstrap, on a machine without a container registry.

# make_base_image ENGINE IMAGE TAG: debootstraps a minimal bookworm from the Debian mirror this machine's apt
# already uses (as apt itself reports it: the repository of its bookworm main index) and imports it as IMAGE
# with ENGINE (podman or docker; both take the same `import`). Messages are prefixed with TAG.
make_base_image() {
  local engine=$1 image=$2 tag=$3 rootfs mirror
  echo "$tag: making $image with debootstrap (about two minutes)"
  mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Codename: bookworm' 'Origin: Debian' \
             'Component: main' 2> /dev/null | head -n 1)
  if [ -z "$mirror" ]; then
    echo "$tag: apt knows no Debian bookworm repository (run apt-get update?)" >&2
    return 1
  fi
  rootfs=$(mktemp -d)
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > /dev/null
  tar -C "$rootfs" -c . | "$engine" import --change 'CMD ["/bin/bash"]' - "$image" > /dev/null
  rm -rf "$rootfs"
}
