# Shared by hack/images/*.sh (sourced, not run): the Debian base images made
# by debootstrap + docker import, without pulling anything.
#
# Callers define log, die and DOCKER before sourcing this file.

# debian_base IMAGE SUITE [MIRROR]: builds IMAGE, `debootstrap
# --variant=minbase SUITE` imported with `docker import`, unless it exists.
# The suite's security and -updates archives are in its sources.list when
# the suite has them (not sid); recommends, suggests and docs are off for
# later installs, as in Debian's own images.
#
# What debootstrap needs on a Debian 12 host: the debootstrap package
# (1.0.128 has scripts for bullseye, trixie and sid) and
# debian-archive-keyring 2023.3+deb12u2 or newer, which holds the 13/trixie
# archive keys (trixie's and sid's Release files are signed with the 12 and
# 13 archive keys; bullseye's with the 11 and 12 ones). No extra keyring, no
# --no-check-gpg. The sid base also tells apt to accept a Release file
# past its Valid-Until (below).
debian_base() {
  local image="$1" suite="$2" mirror="${3:-${DEBIAN_MIRROR:-http://deb.debian.org/debian}}"
  if "$DOCKER" image inspect "$image" >/dev/null 2>&1; then
    log "base $image: present ($("$DOCKER" image inspect -f '{{.Size}}' "$image" | numfmt --to=iec)), debootstrap skipped"
    return 0
  fi
  if ! command -v debootstrap >/dev/null; then
    [ "$(id -u)" -eq 0 ] || die "debootstrap not found and not root: apt-get install debootstrap"
    log "installing debootstrap (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >/dev/null 2>&1 \
      || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >/dev/null; }
  fi
  [ -e "/usr/share/debootstrap/scripts/$suite" ] || die "this debootstrap has no script for $suite (apt-get install debootstrap from a newer release)"
  [ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
  local rootfs t0
  rootfs="$(mktemp -d /tmp/cairn-rootfs-XXXXXX)"
  log "base $image: debootstrap --variant=minbase $suite from $mirror (a few minutes)"
  t0=$SECONDS
  if ! debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1; then
    tail -20 "$rootfs.log" >&2
    rm -rf "$rootfs"
    die "debootstrap of $suite failed (log: $rootfs.log)"
  fi
  rm -f "$rootfs.log"
  # Security updates too, as a Debian image has them; then drop what an
  # image does not need (package lists, caches, docs, man pages).
  if [ "$suite" = sid ] || [ "$suite" = unstable ]; then
    printf 'deb %s %s main\n' "$mirror" "$suite" >"$rootfs/etc/apt/sources.list"
    # sid's Release file is valid for a week only (Valid-Until); the
    # archive this machine reaches can be a snapshot older than that, which
    # apt then refuses as expired. Its signature is still checked.
    printf 'Acquire::Check-Valid-Until "false";\n' >"$rootfs/etc/apt/apt.conf.d/90cairn-sid-snapshot"
  else
    local security="${mirror%/debian}/debian-security"
    printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
      "$mirror" "$suite" "$mirror" "$suite" "$security" "$suite" >"$rootfs/etc/apt/sources.list"
  fi
  rm -f "$rootfs"/etc/apt/sources.list.d/debian.sources
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log \
    "$rootfs"/var/log/apt/* "$rootfs"/tmp/* "$rootfs"/root/.cache
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/90cairn-norecommends"
  printf 'path-exclude /usr/share/doc/*\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\npath-include /usr/share/doc/*/copyright\n' \
    >"$rootfs/etc/dpkg/dpkg.cfg.d/90cairn-nodoc"
  log "debootstrap $suite took $((SECONDS - t0))s; importing"
  tar --numeric-owner -C "$rootfs" -c . | "$DOCKER" import \
    --change 'CMD ["/bin/bash"]' \
    --change "LABEL org.opencontainers.image.description=\"Debian $suite minbase, made by debootstrap for local images\"" \
    - "$image" >/dev/null
  rm -rf "$rootfs"
  log "base $image: built in $((SECONDS - t0))s ($("$DOCKER" image inspect -f '{{.Size}}' "$image" | numfmt --to=iec))"
}
