package zone

import "net/netip"

// Import is what the zone needs of one ServiceImport.
type Import struct {
	Namespace, Name string
	// Headless reports whether the import is of type Headless: its names then
	// answer with the ready endpoints instead of IPs.
	Headless bool
	// IPs are the clusterset IPs of a ClusterSetIP import.
	IPs   []netip.Addr
	Ports []Port
}

// Port is one port of an import.
type Port struct {
	// Name is empty for an unnamed port, which has no _<port>._<proto> record.
	Name string
	// Protocol is TCP, UDP or SCTP; empty means TCP.
	Protocol string
	Port     uint16
}

// Slice is what the zone needs of one EndpointSlice of an import.
type Slice struct {
	// Namespace and Name are the slice's own.
	Namespace, Name string
	// Service is the import's name (label multicluster.kubernetes.io/service-name).
	Service string
	// Cluster is the ID of the cluster the endpoints run in (label
	// multicluster.kubernetes.io/source-cluster).
	Cluster   string
	Endpoints []Endpoint
}

// Endpoint is one endpoint of a slice.
type Endpoint struct {
	// Hostname is the endpoint's hostname field; empty means the per-endpoint
	// name is the first address with its dots or colons turned into dashes.
	Hostname  string
	Addresses []netip.Addr
	Ready     bool
}
