// Package kgctl holds the mesh commands of kilofed's CLI, under Kilo's CLI
// name so that the seed commands work verbatim: graph (the topology as a
// Graphviz picture), showconf node|peer (the WireGuard configuration of a
// node or of an external Peer, or a Peer object to apply in another
// cluster), connect (join this machine to the mesh as a Peer, with an
// embedded WireGuard when the kernel has none) and rotate-keys (ask agents
// for new WireGuard keys through their Nodes and wait for their reports).
//
// The CLI computes the mesh with topology.New, the function every agent
// (kg) calls, from the same snapshot of Nodes and Peers (package k8s) and
// the same options: Compute infers the WireGuard subnet and the mesh
// granularity from what the agents publish (kilo.squat.ai/wireguard-ip,
// kilo.squat.ai/granularity) unless flags say otherwise, and reports agents
// that disagree. What the CLI shows is therefore what the agents apply.
//
// The core is testable without a cluster: a Snapshot (or a FakeSource) goes
// in, text comes out of an io.Writer. Connect applies a Plan, computed
// purely from the topology, through the declarative seams of packages
// wireguard, link and route, in any network namespace.
//
// Command, Program and Main form a small dispatcher: cmd/kgctl runs the
// mesh commands, and cmd/kilofed adds the federation commands to them.
package kgctl
