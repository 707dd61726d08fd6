package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Peer is an external WireGuard peer that joins the mesh: a developer's
// laptop, a monitoring agent, another cluster's gateway.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Allowed IPs",type=string,JSONPath=`.spec.allowedIPs`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,description="Endpoint the mesh uses: resolved from the spec or learnt from handshakes"
// +kubebuilder:printcolumn:name="Keepalive",type=integer,JSONPath=`.spec.persistentKeepalive`
// +kubebuilder:printcolumn:name="Latest Handshake",type=date,JSONPath=`.status.latestHandshake`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Spec Endpoint",type=string,JSONPath=`.spec.endpoint`,priority=1
type Peer struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired peer: its key, the ranges routed to it and where it listens.
	// +required
	Spec PeerSpec `json:"spec"`

	// status is what the mesh agents observe of the peer.
	// +optional
	Status PeerStatus `json:"status,omitempty"`
}

// PeerSpec is the desired configuration of a Peer, field for field Kilo's.
type PeerSpec struct {
	// allowedIPs are the CIDRs routed to this peer through the mesh, such as
	// 10.5.100.2/32 for a laptop or a remote cluster's pod and service CIDRs.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="allowedIPs must list at least one CIDR routed to this peer, such as 10.5.100.2/32"
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",messageExpression="'allowedIPs entry ' + self + ' is not a CIDR: write an address with its prefix length, such as 10.5.100.2/32 or 2001:db8::/64'"
	AllowedIPs []string `json:"allowedIPs"`

	// endpoint is where the peer listens, for peers that other members can
	// reach first; leave it out for a roaming peer (a laptop) whose endpoint
	// is learnt from its handshakes. Written either as Kilo's object
	// {dnsOrIP: {dns: NAME} or {ip: IP}, port: PORT} or as a "host:port"
	// string ("gw.example.com:51820", "203.0.113.7:51820", "[2001:db8::7]:51820").
	// DNS names are resolved by the agents and re-resolved periodically.
	// The API server accepts any value here; the agents check it and report
	// a bad one in the Accepted condition.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Endpoint *PeerEndpoint `json:"endpoint,omitempty"`

	// persistentKeepalive is the interval in seconds between keepalive
	// packets sent to the peer, to keep NAT mappings open; 0 disables them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	PersistentKeepalive int `json:"persistentKeepalive,omitempty"`

	// presharedKey is an optional symmetric key added to the handshake,
	// 44 base64 characters as printed by `wg genpsk`.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9+/]{43}=$')",message="presharedKey must be a WireGuard key: 44 base64 characters as printed by `wg genpsk`"
	PresharedKey string `json:"presharedKey,omitempty"`

	// publicKey is the peer's WireGuard public key, 44 base64 characters as
	// printed by `wg pubkey`.
	// +required
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9+/]{43}=$')",message="publicKey must be a WireGuard public key: 44 base64 characters as printed by `wg pubkey`"
	PublicKey string `json:"publicKey"`
}

// PeerStatus is what the mesh agents observe of a Peer.
type PeerStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Accepted (the spec is valid and its allowed IPs are not
	// claimed by an older peer) and Ready (a recent handshake was seen).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// latestHandshake is when the mesh last completed a handshake with the peer.
	// +optional
	LatestHandshake *metav1.Time `json:"latestHandshake,omitempty"`

	// endpoint is the address the mesh talks to, "ip:port": resolved from
	// the spec's DNS name or learnt from the peer's handshakes.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// rxBytes is the number of bytes received from the peer by the reporting node.
	// +optional
	RxBytes int64 `json:"rxBytes,omitempty"`

	// txBytes is the number of bytes sent to the peer by the reporting node.
	// +optional
	TxBytes int64 `json:"txBytes,omitempty"`

	// node is the mesh node whose WireGuard interface this status was read from.
	// +optional
	Node string `json:"node,omitempty"`
}

// PeerList is a list of Peers.
//
// +kubebuilder:object:root=true
type PeerList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Peers.
	Items []Peer `json:"items"`
}

// Condition types and reasons of a Peer's status.
const (
	// ConditionAccepted is true when the spec is valid and the peer's allowed
	// IPs are configured in the mesh.
	ConditionAccepted = "Accepted"
	// ConditionReady is true when a handshake with the peer was seen recently.
	ConditionReady = "Ready"

	// ReasonValid is the Accepted reason of a valid, configured peer.
	ReasonValid = "Valid"
	// ReasonInvalidSpec is the Accepted reason of a spec the agents cannot use
	// (a bad endpoint, or a key or CIDR that slipped past the schema).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonOverlap is the Accepted reason of a peer whose allowed IPs are
	// claimed by an older peer; the message names the peer and the ranges.
	ReasonOverlap = "AllowedIPsOverlap"
	// ReasonHandshake is the Ready reason of a peer with a recent handshake.
	ReasonHandshake = "RecentHandshake"
	// ReasonNoHandshake is the Ready reason of a peer without one.
	ReasonNoHandshake = "NoRecentHandshake"
)
