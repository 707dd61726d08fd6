// Package k8s is the Kubernetes side of the kilofed mesh: it reads Nodes,
// Peers (peers.kilo.squat.ai) and the agents' Leases into the inputs of the
// pure topology package, and writes what an agent publishes about its own
// node (kilo.squat.ai annotations), its heartbeat Lease and Peer status.
//
// The core is pure: NodeFromObject and PeerFromObject turn one object into a
// topology.Node or topology.Peer, with an error per malformed value that says
// which object, which annotation or field, and what a valid value looks like;
// LeaseFresh decides readiness from times observed locally.
// Client is the thin shell over client-go informers that the agent (kg) and
// the CLI use through the Backend interface; Fake is its in-memory stand-in.
//
// Readiness is what makes leader failover fast (Kilo needs 60 to 90 s): every
// agent renews a coordination.k8s.io Lease named kilo-<node> (in kilo-leases,
// owned by its Node) every third of the lease duration (3 s by default), and
// a node is Ready only while this process has seen its Lease renewed within
// one lease duration, on its own monotonic clock, so clocks of different
// nodes are never compared. Among otherwise equal candidates for leadership
// the Lease created first wins (Node.Since: its creationTimestamp, from the
// API server's clock); an agent that stops heartbeating for a lease duration
// creates its Lease again, so it ranks last when it comes back.
package k8s
