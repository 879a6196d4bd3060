# shellcheck shell=bash
# fleet-net.sh - the network of a fleet test: several test sandboxes
# (scripts/lib/netns-dockerd.sh: a network namespace with its own dockerd
# each) joined by one bridge in a hub namespace, so that gpubox servers on
# different "machines" reach each other and one etcd cluster, while each
# keeps its own dockerd, default bridge and iptables rules. Sourced by
# scripts/test-fleet.sh.
#
#            hub netns HUB (nsd_create, no dockerd): etcd, pytest
#            bridge fleetbr0  $FLEET_NET.1/24
#              |            |            |
#             fl1          fl2          fl3        veth ends in HUB
#              |            |            |
#           fleet0       fleet0       fleet0       veth ends in the nodes
#        $FLEET_NET.11 $FLEET_NET.12 $FLEET_NET.13
#          node 1        node 2        node 3      (nsd_up sandboxes)
#
# FLEET_NET (default 10.77.0) is the first three octets of the /24. Inside
# each node netns, dockerd's default bridge is 172.17.0.0/16 and its other
# networks come from 172.17-31.0.0/16 and 192.168.0.0/16 (Docker's default
# address pools): 10.77.0.0/24 meets none of them. Only the /24 route goes
# over fleet0 (a node has no default route). A node's containers stay
# behind its dockerd's bridge and NAT, as on a real machine: the other
# nodes reach them through the node's address and published ports.
#
# fleet_net_up HUB NODE...
#   In HUB (an existing netns) the bridge with $FLEET_NET.1/24, then for the
#   i-th NODE (1-based; an existing sandbox) a veth pair: fleet0 in NODE with
#   $FLEET_NET.(10+i)/24, up, and fl<i> in HUB on the bridge. Waits until
#   every port forwards. At most 200 nodes. A NODE that has a fleet0
#   already is refused.
# fleet_net_down HUB
#   Removes the bridge and every fl<i> from HUB (each takes its fleet0 with
#   it). Idempotent; fine when HUB is gone. Destroying HUB (nsd_destroy: it
#   was made with nsd_create) removes them as well: the veths go with the
#   namespace.
# fleet_hub_addr / fleet_node_addr I
#   Print $FLEET_NET.1 / $FLEET_NET.(10+I).
# fleet_partition NODE [--reject] PORT...
#   Cuts NODE off from the TCP ports PORT... of the hub address (the etcd
#   members' client ports): a chain of its own, GPUBOX-FLEET-PART, in the
#   filter table of NODE's netns, jumped to first from OUTPUT, drops every
#   packet NODE sends there (established connections included), as a
#   network that lost the route would; with --reject they are refused with
#   a TCP reset instead (fails at once). Everything else - the node's HTTP
#   API, its dockerd, the other nodes - is untouched. Replaces an earlier
#   partition of NODE.
# fleet_heal NODE
#   Removes the partition: the jump and the chain. Idempotent.
#
# Needs root, iproute2 (ip, bridge), util-linux (nsenter) and iptables.
# Safe under `set -euo pipefail`: no function reads an unset variable, and a
# failure is a return status, never an exit.

gpubox_root=${gpubox_root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FLEET_NET=${FLEET_NET:-10.77.0}
FLEET_BRIDGE=fleetbr0
FLEET_NODE_IF=fleet0
FLEET_CHAIN=GPUBOX-FLEET-PART
if ! declare -F _nsd_valid_name >/dev/null; then
    # shellcheck source=scripts/lib/netns-dockerd.sh
    . "$gpubox_root/scripts/lib/netns-dockerd.sh"
fi

fleet_hub_addr() {
    echo "$FLEET_NET.1"
}

fleet_node_addr() {
    echo "$FLEET_NET.$((10 + ${1:?fleet_node_addr I}))"
}

_fleet_netns() {
    local name=${1:-}
    _nsd_valid_name "$name" || return 1
    if [ ! -e "/var/run/netns/$name" ]; then
        echo "fleet-net: no network namespace $name (nsd_create / nsd_up it first)" >&2
        return 1
    fi
}

# A command in netns NAME, as netns-dockerd.sh enters them (nsenter --net).
_fleet_in() {
    local name=$1
    shift
    nsenter --net="/var/run/netns/$name" "$@"
}

fleet_net_up() {
    local hub=${1:-} node i=0 addr
    _fleet_netns "$hub" || return 1
    shift
    if [ $# -eq 0 ] || [ $# -gt 200 ]; then
        echo "fleet-net: usage: fleet_net_up HUB NODE... (1 to 200 nodes)" >&2
        return 1
    fi
    if [[ ! $FLEET_NET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]]; then
        echo "fleet-net: FLEET_NET=$FLEET_NET is not the first three octets of a /24" >&2
        return 1
    fi
    for node in "$@"; do
        _fleet_netns "$node" || return 1
        if ip -n "$node" link show "$FLEET_NODE_IF" >/dev/null 2>&1; then
            echo "fleet-net: $node has a $FLEET_NODE_IF already (on another hub?)" >&2
            return 1
        fi
        # the subnet must be new to the node (a Docker network there, say)
        if ip -n "$node" -4 -o addr show | grep -qF " $FLEET_NET."; then
            echo "fleet-net: $node has an address in $FLEET_NET.0/24 already; set FLEET_NET to another /24" >&2
            return 1
        fi
    done

    if ! ip -n "$hub" link show "$FLEET_BRIDGE" >/dev/null 2>&1; then
        # no STP and no forward delay: a port forwards as soon as it is up
        if ! { ip -n "$hub" link add "$FLEET_BRIDGE" type bridge stp_state 0 forward_delay 0 &&
            ip -n "$hub" addr add "$(fleet_hub_addr)/24" dev "$FLEET_BRIDGE" &&
            ip -n "$hub" link set "$FLEET_BRIDGE" up; }; then
            echo "fleet-net: cannot make the bridge $FLEET_BRIDGE in $hub" >&2
            return 1
        fi
    fi
    for node in "$@"; do
        i=$((i + 1))
        addr=$(fleet_node_addr "$i")
        # made in the hub, the peer moved straight into the node: no name is
        # ever taken in the host's namespace
        if ! { ip -n "$hub" link add "fl$i" type veth peer name "$FLEET_NODE_IF" netns "$node" &&
            ip -n "$hub" link set "fl$i" master "$FLEET_BRIDGE" &&
            ip -n "$hub" link set "fl$i" up &&
            ip -n "$node" addr add "$addr/24" dev "$FLEET_NODE_IF" &&
            ip -n "$node" link set "$FLEET_NODE_IF" up; }; then
            echo "fleet-net: cannot join $node to $hub as $addr" >&2
            return 1
        fi
    done
    # every port forwarding (the bridge has no STP, so this is quick) and
    # every node end up
    local waited
    for waited in $(seq 1 100); do
        local ready=1
        for i in $(seq 1 $#); do
            bridge -n "$hub" link show dev "fl$i" 2>/dev/null | grep -q 'state forwarding' || ready=0
        done
        for node in "$@"; do
            ip -n "$node" link show "$FLEET_NODE_IF" 2>/dev/null | grep -q 'state UP' || ready=0
        done
        [ $ready = 1 ] && break
        if [ "$waited" = 100 ]; then
            echo "fleet-net: the links of $hub are not all up and forwarding after 10 s" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "fleet-net: $hub: bridge $FLEET_BRIDGE $(fleet_hub_addr)/24; $# node(s) $(fleet_node_addr 1)..$(fleet_node_addr $#)"
}

fleet_net_down() {
    local hub=${1:-} link
    _nsd_valid_name "$hub" || return 1
    [ -e "/var/run/netns/$hub" ] || return 0
    # the veth ends on the bridge (fl<i>): deleting one deletes its fleet0
    for link in $(ip -n "$hub" -o link show master "$FLEET_BRIDGE" 2>/dev/null |
        awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
        ip -n "$hub" link delete "$link" 2>/dev/null || true
    done
    if ip -n "$hub" link show "$FLEET_BRIDGE" >/dev/null 2>&1; then
        ip -n "$hub" link delete "$FLEET_BRIDGE" || return 1
    fi
}

fleet_partition() {
    local node=${1:-} target=DROP port
    _fleet_netns "$node" || return 1
    shift
    if [ "${1:-}" = --reject ]; then
        target="REJECT --reject-with tcp-reset"
        shift
    fi
    if [ $# -eq 0 ]; then
        echo "fleet-net: usage: fleet_partition NODE [--reject] PORT..." >&2
        return 1
    fi
    for port in "$@"; do
        if [[ ! $port =~ ^[0-9]{1,5}$ ]]; then
            echo "fleet-net: fleet_partition: bad port '$port'" >&2
            return 1
        fi
    done
    if ! _fleet_in "$node" iptables -w -n -L "$FLEET_CHAIN" >/dev/null 2>&1; then
        _fleet_in "$node" iptables -w -N "$FLEET_CHAIN" || return 1
    fi
    _fleet_in "$node" iptables -w -F "$FLEET_CHAIN" || return 1
    for port in "$@"; do
        # shellcheck disable=SC2086 # target is one or three words
        _fleet_in "$node" iptables -w -A "$FLEET_CHAIN" -p tcp -d "$(fleet_hub_addr)" \
            --dport "$port" -j $target || return 1
    done
    if ! _fleet_in "$node" iptables -w -C OUTPUT -j "$FLEET_CHAIN" 2>/dev/null; then
        _fleet_in "$node" iptables -w -I OUTPUT 1 -j "$FLEET_CHAIN" || return 1
    fi
    echo "fleet-net: $node cut off from $(fleet_hub_addr) port(s) $* ($target)"
}

fleet_heal() {
    local node=${1:-}
    _fleet_netns "$node" || return 1
    while _fleet_in "$node" iptables -w -C OUTPUT -j "$FLEET_CHAIN" 2>/dev/null; do
        _fleet_in "$node" iptables -w -D OUTPUT -j "$FLEET_CHAIN" || return 1
    done
    if _fleet_in "$node" iptables -w -n -L "$FLEET_CHAIN" >/dev/null 2>&1; then
        _fleet_in "$node" iptables -w -F "$FLEET_CHAIN" || return 1
        _fleet_in "$node" iptables -w -X "$FLEET_CHAIN" || return 1
    fi
    echo "fleet-net: $node healed (no partition)"
}
