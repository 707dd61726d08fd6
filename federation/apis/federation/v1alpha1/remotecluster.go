package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RemoteClusterSpec says how to read a joined cluster.
type RemoteClusterSpec struct {
	// clusterID is the remote cluster's ID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterID string `json:"clusterID"`
	// apiServer is the remote API server's URL.
	// +kubebuilder:validation:Pattern=`^https://`
	APIServer string `json:"apiServer"`
	// caBundle is the PEM CA bundle that signs the remote API server's certificate.
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`
	// credentialsSecret names the Secret, in the namespace kilofed-system, whose
	// "token" key holds the read-only token the remote created for this cluster.
	CredentialsSecret string `json:"credentialsSecret"`
	// serviceAccount is the remote ServiceAccount the token belongs to
	// (namespace/name), which the controller asks for a fresh token before
	// the current one expires.
	ServiceAccount string `json:"serviceAccount"`
}

// RemoteClusterStatus is what the controller sees of the remote.
type RemoteClusterStatus struct {
	// conditions: CredentialsValid, APIReachable, CIDRsDisjoint, TunnelsUp, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// apiReachable mirrors the APIReachable condition's status for kubectl's columns.
	// +optional
	APIReachable string `json:"apiReachable,omitempty"`
	// lastContact is when the remote API last answered.
	// +optional
	LastContact *metav1.Time `json:"lastContact,omitempty"`
	// gateways is the number of remote gateways mirrored as local Peers.
	// +optional
	Gateways int32 `json:"gateways"`
	// tunnelsUp is the number of those with a handshake in the last 3 minutes.
	// +optional
	TunnelsUp int32 `json:"tunnelsUp"`
	// latestHandshake is the latest handshake with any remote gateway.
	// +optional
	LatestHandshake *metav1.Time `json:"latestHandshake,omitempty"`
	// announced are the ranges the remote announced last, as read (before
	// any check): the other members' joins and checks compare against them.
	// +optional
	Announced *AnnouncedRanges `json:"announced,omitempty"`
	// acceptedCIDRs are the remote ranges routed here.
	// +optional
	AcceptedCIDRs []string `json:"acceptedCIDRs,omitempty"`
	// refusedCIDRs are the remote ranges left out, with why.
	// +optional
	RefusedCIDRs []string `json:"refusedCIDRs,omitempty"`
	// tokenExpiration is when the current token expires.
	// +optional
	TokenExpiration *metav1.Time `json:"tokenExpiration,omitempty"`
}

// AnnouncedRanges are a cluster's ranges as its Announcement states them.
type AnnouncedRanges struct {
	// podCIDRs are the cluster's pod ranges.
	// +optional
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	// serviceCIDRs are the cluster's Service ranges.
	// +optional
	ServiceCIDRs []string `json:"serviceCIDRs,omitempty"`
	// wireGuardSubnet is the cluster's WireGuard subnet.
	// +optional
	WireGuardSubnet string `json:"wireGuardSubnet,omitempty"`
}

// Condition types of a RemoteCluster.
const (
	CredentialsValid = "CredentialsValid"
	APIReachable     = "APIReachable"
	CIDRsDisjoint    = "CIDRsDisjoint"
	TunnelsUp        = "TunnelsUp"
	Ready            = "Ready"
)

// RemoteCluster is one cluster joined to this one: how to read it and how
// the link is doing. It owns the Peers mirrored from the remote's gateways.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rc
// +kubebuilder:printcolumn:name="Remote ID",type=string,JSONPath=`.spec.clusterID`
// +kubebuilder:printcolumn:name="API",type=string,JSONPath=`.status.apiReachable`,description="the remote API server answers"
// +kubebuilder:printcolumn:name="Gateways",type=integer,JSONPath=`.status.gateways`
// +kubebuilder:printcolumn:name="Tunnels Up",type=integer,JSONPath=`.status.tunnelsUp`
// +kubebuilder:printcolumn:name="Latest Handshake",type=date,JSONPath=`.status.latestHandshake`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemoteCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RemoteClusterSpec   `json:"spec"`
	Status RemoteClusterStatus `json:"status,omitempty"`
}

// RemoteClusterList is a list of RemoteCluster.
//
// +kubebuilder:object:root=true
type RemoteClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemoteCluster `json:"items"`
}
