// Package discover reads what the federation needs to know of one cluster
// from its API server: its ID (the About API's cluster.clusterset.k8s.io
// ClusterProperty), its pod ranges (the Nodes' podCIDRs), its Service
// ranges (ServiceCIDR objects) and its mesh's WireGuard subnet (the
// kilo.squat.ai/wireguard-ip annotations the agents publish). `kilofed
// join` and the controller read a cluster the same way.
package discover
