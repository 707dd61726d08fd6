// Package v1alpha1 is the kilo.squat.ai/v1alpha1 API of the kilofed mesh:
// the cluster-scoped Peer, an external WireGuard peer (a laptop, a monitoring
// agent, another cluster) that joins the mesh.
//
// The Peer spec is compatible with Kilo's: every Kilo Peer manifest applies
// unchanged. In addition the endpoint may be written as a "host:port" string
// (see PeerEndpoint), and a status subresource reports what the agents see
// (conditions, latest handshake, endpoint, bytes).
//
// The API server validates the spec through the CRD schema generated from
// these types (mesh/config/crd): WireGuard keys, CIDRs and the keepalive
// range are checked there with readable messages. The endpoint accepts two
// shapes, so its schema is free-form; Peer.Validate checks it on the agent
// side, which reports a bad endpoint in the Peer's Accepted condition.
//
// +kubebuilder:object:generate=true
// +groupName=kilo.squat.ai
package v1alpha1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.1 object crd paths=./... output:crd:dir=../../../config/crd
