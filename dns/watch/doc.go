// Package watch feeds a zone.Zone from the local cluster: informers on
// ServiceImports and on the EndpointSlices labelled with an MCS service name
// and source cluster, each event converted to the zone's value types. DNS
// queries read only the zone, never the API.
package watch
