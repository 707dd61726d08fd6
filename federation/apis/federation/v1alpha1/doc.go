// Package v1alpha1 is the federation.kilofed.io/v1alpha1 API: what a
// cluster publishes for the clusters joined to it (Announcement) and what it
// knows of each of them (RemoteCluster, cluster-scoped so that it can own
// the cluster-scoped Peers mirrored from the remote). Announcements and the
// remotes' credentials live in the namespace kilofed-system. A remote reads
// only the publishing cluster's
// Announcement, with a token that allows nothing else; a cluster never
// writes into another.
//
// +kubebuilder:object:generate=true
// +groupName=federation.kilofed.io
package v1alpha1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.1 object crd paths=./... output:crd:dir=../../../config/crd
