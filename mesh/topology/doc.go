// Package topology computes the kilofed mesh as a pure, deterministic function
// of the cluster's Nodes and Peers: the segments (locations) and their
// leaders, stable WireGuard IP allocation, the WireGuard configuration and
// the routes of every node, the configuration of external peers, and a DOT
// picture of the whole. It does no I/O; the agent (kg) and the CLI (kilofed)
// call the same functions, so what the CLI shows is what the agents apply.
package topology
