# throttle_dport NS DEV PORT RATE: in namespace NS, the packets DEV sends to TCP port PORT go
# through an htb class of RATE (e.g. 2mbit); everything else stays at full speed. Sourced by
# the netns tests that need a share transfer to take seconds.
throttle_dport() {
  local ns=$1 dev=$2 port=$3 rate=$4
  ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: htb default 10
  ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:10 htb rate 10gbit
  ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:30 htb rate "$rate" ceil "$rate" burst 16kb
  ip netns exec "$ns" tc filter add dev "$dev" parent 1: protocol ip u32 match ip dport "$port" 0xffff flowid 1:30
}
