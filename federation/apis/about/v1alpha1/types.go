package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterIDProperty is the name of the ClusterProperty that holds the
// cluster's ID in a ClusterSet.
const ClusterIDProperty = "cluster.clusterset.k8s.io"

// ClusterPropertySpec is the value of a property.
type ClusterPropertySpec struct {
	// value is the property's value.
	// +kubebuilder:validation:MaxLength=128000
	// +kubebuilder:validation:MinLength=1
	Value string `json:"value"`
}

// ClusterPropertyStatus is empty: a property has no observed state.
type ClusterPropertyStatus struct{}

// ClusterProperty is one named property of the cluster, such as its ID
// (cluster.clusterset.k8s.io).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes/enhancements/pull/3084"
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="value",type=string,JSONPath=`.spec.value`
// +kubebuilder:printcolumn:name="age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterProperty struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterPropertySpec   `json:"spec,omitempty"`
	Status ClusterPropertyStatus `json:"status,omitempty"`
}

// ClusterPropertyList is a list of ClusterProperty.
//
// +kubebuilder:object:root=true
type ClusterPropertyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProperty `json:"items"`
}
