package k8s

// Node annotations and labels, with Kilo's names so that Kilo's manifests,
// documentation and the seed articles apply unchanged.
const (
	// LocationAnnotation names the node's location; it wins over the
	// topology label. Nodes of one location reach each other natively and
	// one of them, the leader, carries the WireGuard tunnels to the others.
	LocationAnnotation = "kilo.squat.ai/location"
	// DefaultTopologyLabel is the label read for the location when the
	// annotation is absent (Kilo's --topology-label default).
	DefaultTopologyLabel = "topology.kubernetes.io/region"
	// LeaderAnnotation, when present (any value but "false"), prefers the
	// node as its location's leader.
	LeaderAnnotation = "kilo.squat.ai/leader"
	// ForceEndpointAnnotation is the host:port other locations must use to
	// reach the node ("195.154.10.20:51820", "gw.example.com:51820",
	// "[2001:db8::1]:51820"); DNS names are kept and resolved later.
	ForceEndpointAnnotation = "kilo.squat.ai/force-endpoint"
	// ForceInternalIPAnnotation overrides the node's internal IP: an address
	// with its prefix length ("10.0.1.10/24"), a bare address (taken as a
	// single host), one of each family separated by a comma, or "" or "-"
	// for none.
	ForceInternalIPAnnotation = "kilo.squat.ai/force-internal-ip"
	// PersistentKeepaliveAnnotation is the keepalive interval in seconds
	// (0 to 65535) the node uses towards its peers, for nodes behind NAT.
	PersistentKeepaliveAnnotation = "kilo.squat.ai/persistent-keepalive"
	// AllowedLocationIPsAnnotation lists extra CIDRs, comma-separated, that
	// the node's location makes reachable from the mesh (a printer, a LAN).
	AllowedLocationIPsAnnotation = "kilo.squat.ai/allowed-location-ips"

	// KeyAnnotation is the node's WireGuard public key, published by its agent.
	KeyAnnotation = "kilo.squat.ai/key"
	// PublicKeyAnnotation is read as an alias of KeyAnnotation when that is
	// absent (the Chinese seed names it); it is never written.
	PublicKeyAnnotation = "kilo.squat.ai/public-key"
	// EndpointAnnotation is the endpoint the agent publishes: "host:port"
	// when it knows better than the Node's addresses (its --endpoint), or
	// ":port" to announce only its listen port.
	EndpointAnnotation = "kilo.squat.ai/endpoint"
	// InternalIPAnnotation is the internal IP the agent publishes, with the
	// prefix length of its interface ("10.0.1.10/24", or "10.0.1.10/24,fd12::10/64"
	// for dual stack) so that others know its subnet.
	InternalIPAnnotation = "kilo.squat.ai/internal-ip"
	// WireGuardIPAnnotation is the address the node wears on its WireGuard
	// interface, with the subnet's prefix length, published by its agent.
	WireGuardIPAnnotation = "kilo.squat.ai/wireguard-ip"
	// GranularityAnnotation is the mesh granularity the agent runs with,
	// published for tools; it is not read back.
	GranularityAnnotation = "kilo.squat.ai/granularity"
	// RotateKeyRequestAnnotation asks the node's agent for a new WireGuard
	// key: the operator (kilofed rotate-keys) writes a unique value, and the
	// agent rotates once per value. The agent may not write it.
	RotateKeyRequestAnnotation = "kilo.squat.ai/rotate-key"
	// KeyRotatedAnnotation is the last RotateKeyRequestAnnotation value the
	// agent honoured, published with the new key in the same write.
	KeyRotatedAnnotation = "kilo.squat.ai/key-rotated"

	// PeerViaGatewayAnnotation on a Peer, "true": the mesh's locations
	// behind NAT reach it through the gateway location (the first with a
	// public endpoint), as they reach a Peer without endpoint. The
	// federation sets it on the Peers that mirror remote gateways.
	PeerViaGatewayAnnotation = "kilofed.io/via-gateway"

	// Kilo's kilo.squat.ai/last-seen heartbeat annotation and its
	// kilo.squat.ai/discovered-endpoints annotation are neither read nor
	// written: Leases replace the first (no Node write every 30 s), and each
	// leader learns NAT endpoints from its own handshakes.
)

// Heartbeat Leases.
const (
	// LeasePrefix starts the name of every node's heartbeat Lease: kilo-<node>.
	LeasePrefix = "kilo-"
	// LeaseLabel marks the heartbeat Leases so that agents watch only them,
	// not the leader-election Leases of other components in the namespace.
	LeaseLabel = "kilo.squat.ai/heartbeat"
	// DefaultLeaseNamespace holds the heartbeat Leases, apart from the
	// leader-election Leases of kube-system (mesh/config/rbac/agent.yaml
	// creates it).
	DefaultLeaseNamespace = "kilo-leases"
)

// LeaseName returns the name of node's heartbeat Lease.
func LeaseName(node string) string { return LeasePrefix + node }

// Location election (ElectionLocation).
const (
	// LeadsAnnotation is published by a location's leader on its own Node
	// (ElectionLocation): "<term>:<location>", the term being the
	// leaseTransitions of the location's election Lease when the node took
	// it. Every agent takes, per location, the node with the highest term
	// whose own location is the one it names, so that the annotation a dead
	// leader left behind loses to its successor's.
	LeadsAnnotation = "kilofed.io/leads"
	// LocationLeasePrefix starts the name of every location's election Lease.
	LocationLeasePrefix = "kilo-location-"
	// ElectionLabel marks the location election Leases; its value is the
	// sanitized location.
	ElectionLabel = "kilo.squat.ai/election"
)
