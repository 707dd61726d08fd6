package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnouncementName is the name of the one Announcement a cluster publishes.
const AnnouncementName = "cluster"

// AnnouncementSpec is a cluster's federation surface: its ID, its ranges
// and the current gateway of each of its locations.
type AnnouncementSpec struct {
	// clusterID is the publishing cluster's ID (its cluster.clusterset.k8s.io property).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterID string `json:"clusterID"`
	// podCIDRs are the cluster's pod ranges.
	// +optional
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	// serviceCIDRs are the cluster's Service ranges.
	// +optional
	ServiceCIDRs []string `json:"serviceCIDRs,omitempty"`
	// wireGuardSubnet is the mesh's WireGuard subnet.
	// +optional
	WireGuardSubnet string `json:"wireGuardSubnet,omitempty"`
	// gateways are the current gateways, one per location, sorted by location.
	// +optional
	// +listType=map
	// +listMapKey=location
	Gateways []Gateway `json:"gateways,omitempty"`
}

// Gateway is the WireGuard identity of one location of the publishing
// cluster, as a remote cluster's Peer needs it.
type Gateway struct {
	// location is the location (mesh segment) the gateway serves.
	Location string `json:"location"`
	// node is the location's current leader.
	Node string `json:"node"`
	// publicKey is the leader's WireGuard public key.
	PublicKey string `json:"publicKey"`
	// endpoint is where the leader listens, host:port; empty when it has no
	// public endpoint (behind NAT: the remote side waits for its handshakes).
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// allowedIPs are the ranges reached through this gateway: the
	// location's pod CIDRs, node IPs and WireGuard IP, those of the
	// locations it carries (see via), and the cluster's Service CIDRs on
	// the gateway location (the first location when none is public).
	AllowedIPs []string `json:"allowedIPs"`
	// via is set on a location behind NAT when the cluster has a location
	// with a public endpoint (its gateway): the NAT'd location's traffic to
	// and from other clusters goes through that location, whose allowedIPs
	// include this location's. Remotes make no Peer for such a gateway.
	// +optional
	Via string `json:"via,omitempty"`
	// persistentKeepalive, in seconds, that the remote should use toward
	// this gateway (a gateway behind NAT needs its remotes' keepalives too).
	// +optional
	PersistentKeepalive int32 `json:"persistentKeepalive,omitempty"`
}

// Announcement is what a cluster publishes for the clusters joined to it.
// The kilofed-controller writes it; remotes read it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ann
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterID`
// +kubebuilder:printcolumn:name="Pods",type=string,JSONPath=`.spec.podCIDRs`
// +kubebuilder:printcolumn:name="Services",type=string,JSONPath=`.spec.serviceCIDRs`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Announcement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AnnouncementSpec `json:"spec"`
}

// AnnouncementList is a list of Announcement.
//
// +kubebuilder:object:root=true
type AnnouncementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Announcement `json:"items"`
}
