// Package topology computes the kilofed mesh as a pure, deterministic function
// of the cluster's Nodes and Peers: the segments (locations) and their
// leaders, stable WireGuard IP allocation, the WireGuard configuration and
// the routes of every node, the configuration of external peers, and a DOT
// picture of the whole. It does no I/O; the agent (kg) and the CLI (kilofed)
// call the same functions, so what the CLI shows is what the agents apply.
//
// New takes the nodes and peers in any order and never modifies them; the
// same input gives the same Topology, byte for byte. It fails only for
// invalid Options. Bad nodes and peers become Problems: Excluded ones are
// left out, Warning ones stay with the offending range removed, and the rest
// of the mesh is built without them.
//
// # Segments and granularity
//
// A segment shares one WireGuard identity (its leader's key and endpoint)
// toward the rest of the mesh.
//
//   - LocationGranularity: one segment per location (kilo.squat.ai/location,
//     else the topology.kubernetes.io/region label, resolved by the backend
//     into Node.Location). Only the leader holds WireGuard tunnels; the other
//     nodes route through it. A node without location, or without internal
//     IP (it cannot reach its location natively), is alone in a segment named
//     after the node, with a Warning.
//   - FullGranularity: one segment per node; every node has a tunnel to
//     every other node.
//   - CrossGranularity: one segment per node; a node has tunnels to every
//     node of the other locations and reaches the nodes of its own location
//     natively (or encapsulated). Every node is a gateway; no single node
//     carries a location's traffic.
//
// In full and cross granularity two nodes of different locations that both
// lack a public endpoint cannot start a handshake with each other; keep such
// nodes behind a location leader (location granularity) or give them public
// endpoints.
//
// # Leaders
//
// Within a location the nodes are ordered by: Ready first (when no node is
// Ready, all nodes count), then the kilo.squat.ai/leader annotation, then a
// public endpoint (an external IP, a DNS endpoint or a forced endpoint other
// than the internal IP), then the longest-running agent (Node.Since, from its
// heartbeat lease; unknown last), then the name. The first one leads: a node
// whose agent starts or comes back does not take leadership from one that
// works, which spares the tunnels a needless switch. Nodes that are
// not Ready stay in the segment, and their pod CIDRs stay routed, but never
// lead while another node is Ready. In full and cross granularity every node
// leads its own segment; Topology.Leader still returns the node the order
// elects, for metrics and for federation.
//
// # Exclusions and warnings
//
// A node is Excluded when it has no name, shares its name with another
// node, has no public key (its agent has not started), shares its key with
// another node or a peer, or has neither an internal IP nor an endpoint.
// Every holder of a shared key is excluded, each with a Problem naming the
// others: whoever copies a key cannot evict its owner and take its place.
// A node is kept with a Warning when it has no location, no internal IP,
// no pod CIDR, a pod CIDR overlapping one of a node named before it (the
// range is dropped), an internal IP another node already uses (not routed
// across locations), a range overlapping the WireGuard subnet, or an
// allowed location IP that overlaps something else (dropped).
//
// A peer is Excluded when it has no name, shares its name, has no public
// key, shares its key with a node (both are excluded) or with an older
// peer, or when one of its allowed IPs overlaps (contains or is contained
// in) a node's pod CIDR, internal IP or public endpoint address, a service
// CIDR, a WireGuard IP a node already announces, or an allowed IP of an
// older peer (by Created, then Name): the older one keeps the range. A peer
// without allowed IPs is kept with a Warning. Peers win over allowed
// location IPs, as in Kilo.
//
// # WireGuard IPs
//
// Every segment gets one address of Options.Subnet, with the subnet's mask;
// its leader wears it. Allocation needs no coordination and is stable:
//
//  1. A segment keeps an address its nodes announce (Node.WireGuardIP, from
//     kilo.squat.ai/wireguard-ip): first the leaders' announcements, segments
//     in name order, then the other nodes' announcements. An announcement is
//     ignored when it is outside the subnet, its first or last address,
//     already taken, or inside a pod CIDR or node IP.
//  2. Every other segment hashes its key ("location:NAME" or "node:NAME")
//     with FNV-1a to a slot and probes upward, wrapping, past taken
//     addresses, the subnet's first and last address and every claimed range
//     (peers' allowed IPs such as the seed's 10.5.100.10/32, pod CIDRs, node
//     IPs, allowed location IPs, service CIDRs). Segments are served in
//     (slot, key) order. In subnets with more than 32 host bits only the
//     first 2^32 addresses are used.
//
// Adding or removing a location therefore moves no other segment unless two
// hashed slots collide, and never once the agents announce their address:
// the agent should publish its segment's WireGuardIP on every node of the
// segment, so that a new leader inherits the address of a dead one. A full
// subnet leaves a segment without address (Warning on its leader); its
// tunnels still work.
//
// # Allowed IPs
//
// A segment's AllowedIPs are its WireGuard IP (/32 or /128), every node's
// pod CIDRs and internal IPs (/32 and /128), and the location's allowed
// location IPs. In full and cross granularity an allowed location IP goes to
// the first node of the location, in election order, that announces it. An
// allowed location IP may contain internal IPs (a location's LAN) but
// nothing else claimed. No range is ever given to two WireGuard peers.
//
// # WireGuard configuration
//
// WireGuardConfig gives a leader one peer per segment it reaches through
// WireGuard and one per accepted Peer, sorted by public key; a node that
// does not lead has no peers. A segment's endpoint is its leader's:
// force-endpoint (Node.Endpoint, set by the backend), else the external IP,
// else the internal IP, with Options.Port when no port is given. A leader
// without public endpoint is configured at its internal IP anyway: the NAT'd
// side initiates (it has persistentKeepalive) and WireGuard's roaming then
// learns its real address, which its peer configuration keeps
// (KeepLearntEndpoint, see wireguard.MergeLearned). Every other peer is
// configured at its endpoint even when an older address still answers, so
// a changed force-endpoint or DNS answer takes effect at once. A link's
// PersistentKeepalive is the larger keepalive of its two ends, so a side
// behind NAT, or a Peer asking for an always-up tunnel, keeps it warm.
//
// A segment without public endpoint and a Peer without endpoint (a roaming
// laptop) can never start a handshake with each other, so they talk
// through the gateway segment (the first segment with a public endpoint):
// the NAT'd leader sends the Peer's ranges to the gateway, and the Peer's
// configuration (PeerConf) sends the NAT'd segment's ranges to the gateway.
//
// PeerConf is the configuration of the external peer itself: its single
// addresses as Address, its endpoint port as ListenPort, one peer per
// segment (except those reached through the gateway) with the Peer's
// preshared key. The other Peers' ranges and the service CIDRs are routed
// through the gateway segment, whose leader forwards them, so a laptop
// reaches the DR cluster and the cluster DNS without any change on them.
//
// # Routes
//
// Routes(N) lists everything node N's kernel needs (table 0 is main), with
// link names from Options.Links:
//
//   - N leads (every node in full and cross granularity): every range of
//     every segment it reaches through WireGuard and of every accepted Peer
//     goes to the WireGuard link without gateway, with N's internal IP of
//     the range's family as preferred source, so that replies come back to
//     an address the other side routes to N (Kilo does the same after its
//     Azure fix). The ranges of accepted Peers take the segment's WireGuard
//     IP as source instead, when it is of the range's family (Kilo's peer
//     routes take kilo0's address): another cluster joined by a Peer routes
//     back this cluster's WireGuard subnet, not its LANs (which may overlap
//     its own), and the segment keeps that address through leader changes.
//   - N does not lead (location granularity): the same ranges, and its own
//     segment's WireGuard IP, go via the leader's internal IP of the range's
//     family: natively on the underlay link, or through the tunnel link,
//     on-link, with N's internal IP as source, when encapsulation applies.
//   - Inside N's segment (location) or location (cross), unless
//     Options.NoLocalRoutes: each other node's pod CIDRs via that node's
//     internal IP of the same family (IPv6 pod CIDRs via InternalIP6; none
//     when it has none), natively or encapsulated. When encapsulated, a
//     route in Options.Table sends traffic from N's pod CIDRs to that node's
//     internal IP through the tunnel too, selected by one policy rule per
//     pod CIDR, as the underlay may drop packets with pod sources.
//   - Native next hops outside N's own subnet are on-link (they need
//     Links.Underlay). Encapsulation applies always, never, or (crosssubnet)
//     when the two nodes' underlay addresses, IPv4 when both have one, are
//     in different subnets. IPv6 ranges through the tunnel need a tunnel
//     link that carries IPv6 (VXLAN does, IPIP does not).
//   - Skipped: destinations overlapping N's pod CIDRs or holding one of N's
//     addresses, and destinations leaving the location that hold a WireGuard
//     endpoint (the route would capture WireGuard's own packets; so the
//     internal IP of a leader without public endpoint is not routed across
//     locations, its pods are).
//
// Routes are sorted by destination then table, rules by source, destination
// and table. TunnelRemotes lists the underlay addresses N encapsulates to.
package topology
