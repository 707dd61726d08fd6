package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the Peer resource, Kilo's group.
const GroupName = "kilo.squat.ai"

// Names of the Peer resource.
const (
	// PeerKind is the kind of the Peer resource.
	PeerKind = "Peer"
	// PeerPlural is the resource name used in URLs: /apis/kilo.squat.ai/v1alpha1/peers.
	PeerPlural = "peers"
	// PeerCRDName is the name of the CustomResourceDefinition that serves Peers.
	PeerCRDName = PeerPlural + "." + GroupName
)

var (
	// SchemeGroupVersion is the group and version of this package's types.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}
	// PeerResource is the group, version and resource of Peers.
	PeerResource = SchemeGroupVersion.WithResource(PeerPlural)

	// SchemeBuilder registers this package's types in a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds Peer and PeerList to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &Peer{}, &PeerList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
