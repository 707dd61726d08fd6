package mirror

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/ranges"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	mk8s "github.com/kilofed/kilofed/mesh/k8s"
)

// Labels of the Peers the controller writes. A Peer without LabelRemote is
// a user's and is never touched.
const (
	// LabelRemote holds the ID of the remote cluster a Peer mirrors.
	LabelRemote = "federation.kilofed.io/remote-cluster"
	// LabelLocation holds the remote location (sanitized to a label value).
	LabelLocation = "federation.kilofed.io/location"
	// LabelManagedBy is app.kubernetes.io/managed-by, set to ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy on mirrored Peers.
	ManagedBy = "kilofed-controller"
	// AnnotationNode holds the name of the remote node that leads the
	// mirrored location, for kilofed status.
	AnnotationNode = "federation.kilofed.io/node"
	// AnnotationCarries lists the remote locations the mirrored gateway
	// carries (those announced with Via), as "location=node,...", for
	// kilofed status.
	AnnotationCarries = "federation.kilofed.io/carries"
)

// DefaultKeepalive is the persistent keepalive, in seconds, of the tunnels to
// remote gateways: DR tunnels stay warm and NAT mappings open.
const DefaultKeepalive = 25

// Result is the outcome of Peers.
type Result struct {
	// Peers are the desired mirrored Peers, sorted by name, without owner
	// (the controller sets it).
	Peers []kilov1.Peer
	// Accepted are the remote's ranges that may be routed here.
	Accepted []ranges.Range
	// Conflicts are the remote's ranges left out, with why.
	Conflicts []ranges.Conflict
	// Problems are the gateways (or parts of them) left out, each saying why.
	Problems []string
}

// Peers returns the Peers that mirror the gateways of remote (as its
// Announcement states them) in the local cluster, checked against local and
// the other members. keepalive is the least persistent keepalive in seconds
// (DefaultKeepalive when zero).
func Peers(remote fedv1.AnnouncementSpec, local ranges.Cluster, others []ranges.Cluster, keepalive int) Result {
	if keepalive <= 0 {
		keepalive = DefaultKeepalive
	}
	var res Result
	rc, bad := Cluster(remote)
	res.Problems = append(res.Problems, bad...)
	res.Accepted, res.Conflicts = ranges.Accept(rc, local, others)
	for _, g := range remote.Gateways {
		if g.Via != "" {
			// Reached through the gateway g.Via, whose Peer carries its
			// ranges (see Announce).
			continue
		}
		p, problems := peerOf(remote.ClusterID, g, res.Accepted, keepalive)
		res.Problems = append(res.Problems, problems...)
		if p != nil {
			var carried []string
			for _, o := range remote.Gateways {
				if o.Via == g.Location {
					carried = append(carried, o.Location+"="+o.Node)
				}
			}
			if len(carried) > 0 {
				p.Annotations[AnnotationCarries] = strings.Join(carried, ",")
			}
			res.Peers = append(res.Peers, *p)
		}
	}
	slices.SortFunc(res.Peers, func(a, b kilov1.Peer) int { return strings.Compare(a.Name, b.Name) })
	return res
}

// Cluster returns the ranges an Announcement states, and a problem for each
// one that does not parse.
func Cluster(a fedv1.AnnouncementSpec) (ranges.Cluster, []string) {
	c := ranges.Cluster{ID: a.ClusterID}
	var problems []string
	parse := func(what string, ss []string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s announces %s %q, which is not a CIDR: left out", a.ClusterID, what, s))
				continue
			}
			out = append(out, p.Masked())
		}
		return out
	}
	c.Pods = parse("pod range", a.PodCIDRs)
	c.Services = parse("service range", a.ServiceCIDRs)
	if a.WireGuardSubnet != "" {
		if w := parse("WireGuard subnet", []string{a.WireGuardSubnet}); len(w) == 1 {
			c.WireGuard = w[0]
		}
	}
	return c, problems
}

// peerOf returns the Peer of one remote gateway, or nil with why.
func peerOf(cluster string, g fedv1.Gateway, accepted []ranges.Range, keepalive int) (*kilov1.Peer, []string) {
	where := fmt.Sprintf("gateway %s of %s (node %s)", g.Location, cluster, g.Node)
	var problems []string
	if err := kilov1.ValidateKey("publicKey", g.PublicKey); err != nil {
		return nil, []string{fmt.Sprintf("%s left out: %v", where, err)}
	}
	var allowed []string
	for _, s := range g.AllowedIPs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: allowed IP %q is not a CIDR: left out", where, s))
			continue
		}
		if !ranges.Allowed(p, accepted) {
			problems = append(problems, fmt.Sprintf("%s: allowed IP %s is outside the ranges accepted from %s: left out", where, p, cluster))
			continue
		}
		allowed = append(allowed, p.Masked().String())
	}
	if len(allowed) == 0 {
		return nil, append(problems, fmt.Sprintf("%s left out: none of its allowed IPs may be routed here", where))
	}
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	p := &kilov1.Peer{
		TypeMeta: metav1.TypeMeta{APIVersion: kilov1.SchemeGroupVersion.String(), Kind: kilov1.PeerKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: PeerName(cluster, g.Location),
			Labels: map[string]string{
				LabelRemote:    cluster,
				LabelLocation:  labelValue(g.Location),
				LabelManagedBy: ManagedBy,
			},
			// This cluster's NAT'd locations reach the remote through this
			// cluster's gateway, as the remote reaches them (see Announce).
			Annotations: map[string]string{AnnotationNode: g.Node, mk8s.PeerViaGatewayAnnotation: "true"},
		},
		Spec: kilov1.PeerSpec{
			AllowedIPs:          allowed,
			PublicKey:           g.PublicKey,
			PersistentKeepalive: max(keepalive, int(g.PersistentKeepalive)),
		},
	}
	if g.Endpoint != "" {
		e, err := kilov1.ParseEndpoint(g.Endpoint)
		if err != nil {
			// Without an endpoint the remote gateway can still reach us
			// (our gateways have one); keep the Peer, say why.
			problems = append(problems, fmt.Sprintf("%s: endpoint: %v: waiting for its handshakes instead", where, err))
		} else {
			p.Spec.Endpoint = &e
		}
	}
	return p, problems
}

// CarriedLocation is a remote location reached through another's gateway.
type CarriedLocation struct{ Location, Node string }

// Carried parses an AnnotationCarries value.
func Carried(v string) []CarriedLocation {
	var out []CarriedLocation
	for _, item := range strings.Split(v, ",") {
		if loc, node, ok := strings.Cut(item, "="); ok && loc != "" {
			out = append(out, CarriedLocation{Location: loc, Node: node})
		}
	}
	return out
}

var notName = regexp.MustCompile(`[^a-z0-9-]+`)

// PeerName returns the name of the Peer that mirrors location of cluster:
// "<cluster>-<location>", lowercased to a DNS-1123 subdomain; too long a
// name is cut and suffixed with a hash so that names stay distinct.
func PeerName(cluster, location string) string {
	n := strings.Trim(notName.ReplaceAllString(strings.ToLower(cluster+"-"+location), "-"), "-")
	if len(n) <= 63 && n == strings.ToLower(cluster+"-"+location) {
		return n
	}
	sum := sha256.Sum256([]byte(cluster + "/" + location))
	if len(n) > 52 {
		n = n[:52]
	}
	return strings.Trim(n, "-") + "-" + hex.EncodeToString(sum[:])[:10]
}

// labelValue returns s as a valid label value.
func labelValue(s string) string {
	v := strings.Trim(regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(s, "-"), "-._")
	if len(v) > 63 {
		v = strings.Trim(v[:63], "-._")
	}
	return v
}
