package merge

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kilofed/kilofed/federation/ranges"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// Input is everything one service's merge depends on.
type Input struct {
	// Local is this cluster's ranges; its exports' endpoints are not checked.
	Local ranges.Cluster
	// Remotes are the joined clusters' announced ranges. An export of a
	// cluster that is neither Local nor a remote is refused.
	Remotes []ranges.Cluster
	// Exports are every cluster's export of the service, in any order.
	Exports []ssv1.ExportedServiceSpec
}

// Import is the merged service: what the ServiceImport and the derived
// Service of every cluster hold.
type Import struct {
	Namespace, Name string
	Type            ssv1.ServiceType
	// Ports are the union of the exports' ports, sorted by name, protocol
	// and port; a conflicting port is the oldest export's.
	Ports                 []ssv1.ServicePort
	SessionAffinity       corev1.ServiceAffinity
	SessionAffinityConfig *corev1.SessionAffinityConfig
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy
	TrafficDistribution   *string
	IPFamilies            []corev1.IPFamily
	// Labels and Annotations are the oldest export's exportedLabels and
	// exportedAnnotations.
	Labels, Annotations map[string]string
	// Clusters are the exporting clusters, sorted.
	Clusters []string
	// Oldest is the cluster whose export is the oldest: its properties win.
	Oldest string
}

// Conflict is how one export conflicts with the others.
type Conflict struct {
	// Reasons are the mcs-api Conflict reasons, in the API's order;
	// empty when the export conflicts with none.
	Reasons []string
	// Message says what differs and which export won.
	Message string
}

// Result is the outcome of Merge.
type Result struct {
	// Import is the merged service; nil when no joined cluster exports it.
	Import *Import
	// Conflicts are, by cluster ID, how each export conflicts.
	Conflicts map[string]Conflict
	// Slices are the endpoints by source cluster (sorted by cluster,
	// address type, index), as the EndpointSlices hold them.
	Slices []Slice
	// Refused are the endpoint addresses left out, with why.
	Refused []Refusal
}

// The mcs-api's Conflict reasons, in its order.
const (
	PortConflict                  = "PortConflict"
	TypeConflict                  = "TypeConflict"
	SessionAffinityConflict       = "SessionAffinityConflict"
	SessionAffinityConfigConflict = "SessionAffinityConfigConflict"
	AnnotationsConflict           = "AnnotationsConflict"
	LabelsConflict                = "LabelsConflict"
	InternalTrafficPolicyConflict = "InternalTrafficPolicyConflict"
	TrafficDistributionConflict   = "TrafficDistributionConflict"
	IPFamilyConflict              = "IPFamilyConflict"
)

var reasonOrder = []string{PortConflict, TypeConflict, SessionAffinityConflict, SessionAffinityConfigConflict,
	AnnotationsConflict, LabelsConflict, InternalTrafficPolicyConflict, TrafficDistributionConflict, IPFamilyConflict}

// Merge merges the exports of one service. It is deterministic: every
// cluster given the same exports computes the same import, whatever their
// order.
func Merge(in Input) Result {
	res := Result{Conflicts: map[string]Conflict{}}
	known := map[string]ranges.Cluster{in.Local.ID: in.Local}
	for _, r := range in.Remotes {
		if r.ID != in.Local.ID {
			known[r.ID] = r
		}
	}
	var exports []ssv1.ExportedServiceSpec
	for _, e := range in.Exports {
		if _, ok := known[e.ClusterID]; !ok {
			res.Refused = append(res.Refused, refuseAll(e, "the cluster "+e.ClusterID+" is not joined to this one")...)
			continue
		}
		exports = append(exports, normalize(e))
	}
	if len(exports) == 0 {
		return res
	}
	slices.SortFunc(exports, func(a, b ssv1.ExportedServiceSpec) int {
		return cmp.Or(a.ExportCreated.Time.Compare(b.ExportCreated.Time), cmp.Compare(a.ClusterID, b.ClusterID))
	})
	oldest := exports[0]
	imp := &Import{
		Namespace: oldest.Namespace, Name: oldest.Name, Type: oldest.Type, Oldest: oldest.ClusterID,
		SessionAffinity: oldest.SessionAffinity, SessionAffinityConfig: oldest.SessionAffinityConfig,
		InternalTrafficPolicy: oldest.InternalTrafficPolicy, TrafficDistribution: oldest.TrafficDistribution,
		IPFamilies: oldest.IPFamilies, Labels: oldest.ExportedLabels, Annotations: oldest.ExportedAnnotations,
	}
	reasons := map[string]map[string]bool{}
	msgs := map[string][]string{}
	conflict := func(a, b, reason, msg string) {
		for _, c := range []string{a, b} {
			if reasons[c] == nil {
				reasons[c] = map[string]bool{}
			}
			reasons[c][reason] = true
			msgs[c] = append(msgs[c], msg)
		}
	}
	// owner of each merged port, by name and by protocol/port.
	byName := map[string]int{}
	byNumber := map[string]int{}
	portOwner := map[int]string{}
	for _, e := range exports {
		imp.Clusters = append(imp.Clusters, e.ClusterID)
		if !slices.Equal(sortedPorts(oldest.Ports), sortedPorts(e.Ports)) {
			conflict(oldest.ClusterID, e.ClusterID, PortConflict, fmt.Sprintf("ports: %s's export has %s, %s's (the oldest) %s; the import has the union, each port reaching only the clusters that export it",
				e.ClusterID, portsString(e.Ports), oldest.ClusterID, portsString(oldest.Ports)))
		}
		for _, p := range diffs(oldest, e) {
			conflict(oldest.ClusterID, e.ClusterID, p.reason, fmt.Sprintf("%s: %s's export has %s, %s's (the oldest, which wins) has %s", p.what, e.ClusterID, p.theirs, oldest.ClusterID, p.ours))
		}
		for _, p := range e.Ports {
			num := string(p.Protocol) + "/" + fmt.Sprint(p.Port)
			if i, ok := byName[p.Name]; ok {
				if q := imp.Ports[i]; !reflect.DeepEqual(q, p) {
					conflict(portOwner[i], e.ClusterID, PortConflict, fmt.Sprintf("port %q: %s's export has %s, %s's (older, which wins) has %s", p.Name, e.ClusterID, portString(p), portOwner[i], portString(q)))
				}
				continue
			}
			if i, ok := byNumber[num]; ok {
				conflict(portOwner[i], e.ClusterID, PortConflict, fmt.Sprintf("port %s: %s's export names it %q, %s's (older, which wins) %q", num, e.ClusterID, p.Name, portOwner[i], imp.Ports[i].Name))
				continue
			}
			byName[p.Name], byNumber[num] = len(imp.Ports), len(imp.Ports)
			portOwner[len(imp.Ports)] = e.ClusterID
			imp.Ports = append(imp.Ports, p)
		}
	}
	slices.Sort(imp.Clusters)
	imp.Clusters = slices.Compact(imp.Clusters)
	slices.SortFunc(imp.Ports, func(a, b ssv1.ServicePort) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
	})
	res.Import = imp
	for c, rs := range reasons {
		var cf Conflict
		for _, r := range reasonOrder {
			if rs[r] {
				cf.Reasons = append(cf.Reasons, r)
			}
		}
		cf.Message = strings.Join(slices.Compact(msgs[c]), "; ")
		res.Conflicts[c] = cf
	}
	for _, e := range exports {
		s, refused := endpoints(e, imp, known[e.ClusterID], e.ClusterID == in.Local.ID, in.Local, in.Remotes)
		res.Slices = append(res.Slices, s...)
		res.Refused = append(res.Refused, refused...)
	}
	slices.SortStableFunc(res.Slices, func(a, b Slice) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.AddressType, b.AddressType))
	})
	return res
}

// normalize gives e the defaults the API server would: TCP ports,
// affinity None without config, empty maps as nil.
func normalize(e ssv1.ExportedServiceSpec) ssv1.ExportedServiceSpec {
	e = *e.DeepCopy()
	for i := range e.Ports {
		e.Ports[i].Protocol = cmp.Or(e.Ports[i].Protocol, corev1.ProtocolTCP)
	}
	for i := range e.Endpoints {
		for j := range e.Endpoints[i].Ports {
			e.Endpoints[i].Ports[j].Protocol = cmp.Or(e.Endpoints[i].Ports[j].Protocol, corev1.ProtocolTCP)
		}
	}
	e.SessionAffinity = cmp.Or(e.SessionAffinity, corev1.ServiceAffinityNone)
	if e.SessionAffinity == corev1.ServiceAffinityNone {
		e.SessionAffinity = ""
	}
	if len(e.ExportedLabels) == 0 {
		e.ExportedLabels = nil
	}
	if len(e.ExportedAnnotations) == 0 {
		e.ExportedAnnotations = nil
	}
	if len(e.IPFamilies) == 0 {
		e.IPFamilies = nil
	}
	return e
}

type diff struct{ reason, what, ours, theirs string }

// diffs returns every property but the ports in which e differs from the
// oldest export.
func diffs(oldest, e ssv1.ExportedServiceSpec) []diff {
	var out []diff
	add := func(reason, what string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			out = append(out, diff{reason, what, show(a), show(b)})
		}
	}
	add(TypeConflict, "type", oldest.Type, e.Type)
	add(SessionAffinityConflict, "sessionAffinity", oldest.SessionAffinity, e.SessionAffinity)
	add(SessionAffinityConfigConflict, "sessionAffinityConfig", oldest.SessionAffinityConfig, e.SessionAffinityConfig)
	add(AnnotationsConflict, "exportedAnnotations", oldest.ExportedAnnotations, e.ExportedAnnotations)
	add(LabelsConflict, "exportedLabels", oldest.ExportedLabels, e.ExportedLabels)
	add(InternalTrafficPolicyConflict, "internalTrafficPolicy", oldest.InternalTrafficPolicy, e.InternalTrafficPolicy)
	add(TrafficDistributionConflict, "trafficDistribution", oldest.TrafficDistribution, e.TrafficDistribution)
	add(IPFamilyConflict, "ipFamilies", oldest.IPFamilies, e.IPFamilies)
	return out
}

// show prints a property value for a message.
func show(v any) string {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice) && rv.IsNil() {
		return "none"
	}
	switch x := v.(type) {
	case *string:
		return *x
	case *corev1.ServiceInternalTrafficPolicy:
		return string(*x)
	case *corev1.SessionAffinityConfig:
		if x.ClientIP != nil && x.ClientIP.TimeoutSeconds != nil {
			return fmt.Sprintf("clientIP timeout %ds", *x.ClientIP.TimeoutSeconds)
		}
	case map[string]string:
		keys := slices.Sorted(maps.Keys(x))
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+x[k])
		}
		return strings.Join(kv, ",")
	}
	if s := fmt.Sprint(v); s != "" {
		return s
	}
	return "none"
}

func sortedPorts(ps []ssv1.ServicePort) []ssv1.ServicePort {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b ssv1.ServicePort) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
	})
	return slices.CompactFunc(out, func(a, b ssv1.ServicePort) bool { return reflect.DeepEqual(a, b) })
}

func portsString(ps []ssv1.ServicePort) string {
	var out []string
	for _, p := range sortedPorts(ps) {
		out = append(out, fmt.Sprintf("%q %s", p.Name, portString(p)))
	}
	if len(out) == 0 {
		return "no port"
	}
	return strings.Join(out, ", ")
}

func portString(p ssv1.ServicePort) string {
	s := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
	if p.AppProtocol != nil {
		s += " (" + *p.AppProtocol + ")"
	}
	return s
}
