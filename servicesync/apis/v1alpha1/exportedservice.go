package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Resource is the plural name of ExportedService, as RBAC rules name it.
const Resource = "exportedservices"

// ServiceType is how an exported Service is reached: ClusterSetIP or
// Headless, the values of the MCS ServiceImport's type.
type ServiceType string

// The types of an exported Service.
const (
	ClusterSetIP ServiceType = "ClusterSetIP"
	Headless     ServiceType = "Headless"
)

// ExportedServiceSpec is one ServiceExport of the publishing cluster and
// the Service it exports, as the merge in the other clusters needs them.
type ExportedServiceSpec struct {
	// clusterID is the publishing cluster's ID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterID string `json:"clusterID"`
	// namespace and name are those of the Service and its ServiceExport.
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// exportCreated is the ServiceExport's creationTimestamp: the oldest
	// export of a service decides its conflicting properties.
	ExportCreated metav1.Time `json:"exportCreated"`
	// type is Headless for a Service with clusterIP None, else ClusterSetIP.
	// +kubebuilder:validation:Enum=ClusterSetIP;Headless
	Type ServiceType `json:"type"`
	// ports are the Service's ports.
	// +optional
	Ports []ServicePort `json:"ports,omitempty"`
	// sessionAffinity is the Service's.
	// +optional
	SessionAffinity corev1.ServiceAffinity `json:"sessionAffinity,omitempty"`
	// sessionAffinityConfig is the Service's.
	// +optional
	SessionAffinityConfig *corev1.SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
	// internalTrafficPolicy is the Service's.
	// +optional
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy `json:"internalTrafficPolicy,omitempty"`
	// trafficDistribution is the Service's.
	// +optional
	TrafficDistribution *string `json:"trafficDistribution,omitempty"`
	// ipFamilies are the Service's.
	// +optional
	IPFamilies []corev1.IPFamily `json:"ipFamilies,omitempty"`
	// exportedLabels and exportedAnnotations are the ServiceExport's.
	// +optional
	ExportedLabels map[string]string `json:"exportedLabels,omitempty"`
	// +optional
	ExportedAnnotations map[string]string `json:"exportedAnnotations,omitempty"`
	// endpoints are the Service's endpoints, grouped by address type and
	// ports as its EndpointSlices group them.
	// +optional
	Endpoints []EndpointGroup `json:"endpoints,omitempty"`
}

// ServicePort is a port of the exported Service.
type ServicePort struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	// +optional
	AppProtocol *string `json:"appProtocol,omitempty"`
	Port        int32   `json:"port"`
}

// EndpointGroup is endpoints that share an address type and ports (the
// pods' ports, named after the Service's ports).
type EndpointGroup struct {
	AddressType discoveryv1.AddressType `json:"addressType"`
	// +optional
	Ports []EndpointPort `json:"ports,omitempty"`
	// +optional
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// EndpointPort is a port of the endpoints.
type EndpointPort struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	// +optional
	AppProtocol *string `json:"appProtocol,omitempty"`
	Port        int32   `json:"port"`
}

// Endpoint is one endpoint of the exported Service.
type Endpoint struct {
	// addresses are the endpoint's IPs (pod IPs).
	Addresses []string `json:"addresses"`
	// hostname is the endpoint's hostname, for headless per-pod names.
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// ready, serving and terminating are the endpoint's conditions.
	Ready       bool `json:"ready"`
	Serving     bool `json:"serving"`
	Terminating bool `json:"terminating"`
}

// ExportedService is one ServiceExport of the publishing cluster, named
// <namespace>.<name>. The kilofed-controller writes it; the joined
// clusters read it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=exsvc
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterID`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ExportedService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ExportedServiceSpec `json:"spec"`
}

// ExportedServiceList is a list of ExportedService.
//
// +kubebuilder:object:root=true
type ExportedServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExportedService `json:"items"`
}

// ObjectName returns the name of the ExportedService of the Service
// namespace/name: namespaces and Service names hold no dot.
func ObjectName(namespace, name string) string { return namespace + "." + name }
