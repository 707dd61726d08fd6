package lab

import "fmt"

// The lab's host-side components (etcd, kube-controller-manager,
// kube-scheduler) listen on 127.0.0.1 on ports that the lab hands out from
// its slot's block of ports below the kernel's ephemeral range. A port taken
// from the ephemeral range ("listen on :0, close, pass it on") can be taken
// again in the moment before the component binds it, by any outgoing
// connection on the machine (a CI run lost kube-scheduler that way: "bind:
// address already in use"); a port below the range is never used for an
// outgoing connection, and the slot keeps two labs' blocks apart.
const (
	// portBase is the first port of slot 0's block.
	portBase = 20000
	// portsPerSlot is the size of a slot's block: four ports per cluster.
	portsPerSlot = 160
)

// portBlock returns the lab ports of slot s: [first, first+portsPerSlot).
func portBlock(slot int) (first, end int, err error) {
	if slot < 0 || slot >= maxSlots {
		return 0, 0, fmt.Errorf("slot %d is outside 0..%d", slot, maxSlots-1)
	}
	first = portBase + slot*portsPerSlot
	return first, first + portsPerSlot, nil
}
