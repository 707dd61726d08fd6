// Package agent is the kg node agent's reconcile loop: it reads the cluster
// (Nodes, Peers, leases) through a k8s.Backend, computes the topology with the
// pure topology package, and applies this node's share of it through
// declarative seams (WireGuard device, addresses, routes, encapsulation,
// firewall), then publishes this node's annotations and the Peers' status.
// Every apply is level-based and safe to repeat: a change, a resync tick or a
// deleted rule all lead to the same Set calls with the whole desired state.
package agent
