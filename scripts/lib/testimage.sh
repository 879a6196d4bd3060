# testimage.sh - the local test image: busybox-static imported with
# `docker import`, so nothing is pulled from the internet (DESIGN.md
# section 5). Sourced by scripts/test.sh and bench/*.sh.
#
# testimage_ensure NAME  imports NAME if absent; sets TESTIMAGE_CREATED=1 if it did.
# testimage_remove_if_created NAME

TESTIMAGE_CREATED=""
DOCKER=${DOCKER:-/usr/bin/docker}

testimage_ensure() {
    local name=$1
    if "$DOCKER" image inspect "$name" >/dev/null 2>&1; then
        return 0
    fi
    # Debian's busybox-static installs a statically linked /bin/busybox, which
    # runs in an image with no libc.
    local busybox=/bin/busybox
    local rootfs
    rootfs=$(mktemp -d)
    mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/root" "$rootfs/proc" \
        "$rootfs/sys" "$rootfs/dev" "$rootfs/var" "$rootfs/usr"
    chmod 1777 "$rootfs/tmp"
    cp "$busybox" "$rootfs/bin/busybox"
    local applet
    for applet in $("$rootfs/bin/busybox" --list); do
        [ "$applet" = busybox ] || ln -s busybox "$rootfs/bin/$applet"
    done
    echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
    echo 'root:x:0:' >"$rootfs/etc/group"
    tar -C "$rootfs" -c . | "$DOCKER" import \
        -c 'CMD ["/bin/sh"]' -c 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' - "$name" >/dev/null
    rm -rf "$rootfs"
    TESTIMAGE_CREATED=1
    echo "test image: imported $name from busybox-static"
}

testimage_remove_if_created() {
    [ -n "$TESTIMAGE_CREATED" ] || return 0
    "$DOCKER" image rm -f "$1" >/dev/null 2>&1 || true
    TESTIMAGE_CREATED=""
}
