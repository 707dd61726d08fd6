package kubelet

import "net/netip"

// Fixed addresses of the Calico-style pod network: each pod's default route
// goes through these link-local next hops, answered by the node's veth end.
var (
	podGateway4 = netip.MustParseAddr("169.254.1.1")
	podGateway6 = netip.MustParseAddr("fe80::1")
)

// podNetworkName is the name of the pod side of the veth.
const podNetworkName = "eth0"

// sandboxSpec is the network of one pod.
type sandboxSpec struct {
	// HostNetwork pods run in the node's netns; nothing is created for them.
	HostNetwork bool
	Netns       string // the pod's netns (NodeNetns for HostNetwork)
	NodeNetns   string
	HostVeth    string       // node end of the veth
	IPs         []netip.Addr // pod addresses, IPv4 first
	MTU         int          // 0: kernel default
	ResolvConf  string       // content of /etc/netns/<Netns>/resolv.conf; "" for none
}

// podNetwork creates and removes pod networks.
type podNetwork interface {
	// Setup creates the netns, the veth pair (pod end eth0 with the pod
	// IPs and a default route via the link-local gateway; node end with
	// proxy ARP, forwarding and a host route per pod IP) and resolv.conf.
	// On error it leaves nothing behind.
	Setup(s sandboxSpec) error
	// Teardown removes whatever Setup created; missing pieces are not errors.
	Teardown(s sandboxSpec) error
}
