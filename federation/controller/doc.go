// Package controller is the federation half of kilofed-controller, one per
// cluster. It publishes this cluster's gateways (the mesh's own topology,
// through federation/mirror) as its Announcement, and for every joined
// cluster (a RemoteCluster) reads that cluster's Announcement with the
// scoped token join stored, and keeps one local Peer per remote gateway,
// owned by the RemoteCluster, so that the mesh's agents build the tunnels.
//
// A remote API server that does not answer changes nothing: its Peers stay
// as last read (the tunnels keep carrying traffic), and the RemoteCluster's
// APIReachable condition says since when. Peers are only created, changed or
// swept after a fresh, complete read of the remote's Announcement.
package controller
