package join

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	aboutv1 "github.com/kilofed/kilofed/federation/apis/about/v1alpha1"
	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/federation/ranges"
)

// FieldOwner is the field manager of everything join writes.
const FieldOwner = "kilofed-join"

// DefaultTokenTTL is the lifetime of the tokens join issues; the controller
// renews them before they expire.
const DefaultTokenTTL = 24 * time.Hour

// ErrRefused wraps every reason Join refuses to link two clusters; nothing
// was written in either cluster then.
var ErrRefused = errors.New("join refused")

// Side is one of the two clusters of a join.
type Side struct {
	// Cluster is the cluster, reached with the operator's credentials.
	Cluster *kube.Cluster
	// ID is the cluster ID to set if the cluster has none yet; empty means
	// the kubeconfig context's name.
	ID string
	// Ranges override what discovery finds (pod CIDRs for clusters whose
	// Nodes carry none, Service CIDRs).
	Ranges discover.Options
	// APIServer, when set, is the URL the other cluster reaches this API
	// server at, instead of the kubeconfig's.
	APIServer string
}

// Options configure Join.
type Options struct {
	// Local and Remote are the two clusters.
	Local, Remote Side
	// DryRun prints what would be written, and writes nothing.
	DryRun bool
	// TokenTTL is the lifetime of the issued tokens; zero means DefaultTokenTTL.
	TokenTTL time.Duration
	// Wait is how long to wait for the first handshake between the two
	// clusters; zero does not wait.
	Wait time.Duration
	// Out receives the progress, one line per step; nil discards it.
	Out io.Writer
}

// member is one side as discovered.
type member struct {
	side   Side
	ranges ranges.Cluster
	hasID  bool
	// joined are the clusters already joined to this one.
	joined []fedv1.RemoteCluster
}

// Join links o.Local and o.Remote (see the package doc). Running it again
// changes nothing.
func Join(ctx context.Context, o Options) error {
	p := progress{w: o.Out}
	if o.TokenTTL <= 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	var ms [2]*member
	for i, s := range []Side{o.Local, o.Remote} {
		p.step("discovering %s", s.Cluster.Name)
		m, err := discoverMember(ctx, s)
		if err != nil {
			return err
		}
		p.detail("%s: ID %s, pods %v, services %v, WireGuard %v, %d joined", s.Cluster.Name, m.ranges.ID, m.ranges.Pods, m.ranges.Services, validOrNone(m.ranges.WireGuard), len(m.joined))
		ms[i] = m
	}
	p.step("checking ranges and IDs")
	if err := check(ms[0], ms[1]); err != nil {
		return err
	}
	switch n := len(others(ms[0], ms[1])); n {
	case 0:
		p.detail("no overlap between %s and %s", ms[0].ranges.ID, ms[1].ranges.ID)
	case 1:
		p.detail("no overlap between %s, %s and the cluster they are joined to", ms[0].ranges.ID, ms[1].ranges.ID)
	default:
		p.detail("no overlap between %s, %s and the %d clusters they are joined to", ms[0].ranges.ID, ms[1].ranges.ID, n)
	}

	for _, pair := range [][2]*member{{ms[0], ms[1]}, {ms[1], ms[0]}} {
		pub, reader := pair[0], pair[1]
		p.step("creating credentials in %s for %s", pub.ranges.ID, reader.ranges.ID)
		if err := link(ctx, pub, reader, o, &p); err != nil {
			return err
		}
	}
	if o.DryRun {
		p.verdict("dry run: nothing was written")
		return nil
	}
	if o.Wait > 0 {
		p.step("waiting for the first handshake (up to %s)", o.Wait)
		if err := waitHandshake(ctx, ms[0], ms[1], o.Wait, &p); err != nil {
			p.verdict("joined %s and %s, but %v", ms[0].ranges.ID, ms[1].ranges.ID, err)
			return err
		}
	}
	p.verdict("joined %s and %s", ms[0].ranges.ID, ms[1].ranges.ID)
	return nil
}

func discoverMember(ctx context.Context, s Side) (*member, error) {
	c := s.Cluster.Client
	r, err := discover.Ranges(ctx, c, s.Ranges)
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", s.Cluster.Name, err)
	}
	m := &member{side: s, ranges: r}
	switch id, err := discover.ClusterID(ctx, c); {
	case err == nil:
		if s.ID != "" && s.ID != id {
			return nil, fmt.Errorf("%w: %s already has the ID %q, and a cluster's ID never changes; drop --cluster-id %s or pass --cluster-id %s", ErrRefused, s.Cluster.Name, id, s.ID, id)
		}
		m.ranges.ID, m.hasID = id, true
	case errors.Is(err, discover.ErrNoClusterID):
		m.ranges.ID = s.ID
		if m.ranges.ID == "" {
			m.ranges.ID = s.Cluster.Name
		}
		if err := discover.ValidateClusterID(m.ranges.ID); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrRefused, s.Cluster.Name, err)
		}
	case meta.IsNoMatchError(err):
		return nil, fmt.Errorf("%s does not serve ClusterProperty (about.k8s.io): install kilofed's CRDs first (the chart, or kubectl apply -f federation/config/crd): %w", s.Cluster.Name, err)
	default:
		return nil, fmt.Errorf("discover %s: %w", s.Cluster.Name, err)
	}
	var rcs fedv1.RemoteClusterList
	if err := c.List(ctx, &rcs); err != nil {
		return nil, fmt.Errorf("list the clusters joined to %s (are kilofed's CRDs installed?): %w", s.Cluster.Name, err)
	}
	m.joined = rcs.Items
	return m, nil
}

// others returns the clusters joined to a or b, other than a and b.
func others(a, b *member) []ranges.Cluster {
	seen := map[string]bool{a.ranges.ID: true, b.ranges.ID: true}
	var out []ranges.Cluster
	for _, m := range []*member{a, b} {
		for _, rc := range m.joined {
			if seen[rc.Spec.ClusterID] {
				continue
			}
			seen[rc.Spec.ClusterID] = true
			out = append(out, AnnouncedRanges(rc))
		}
	}
	return out
}

// AnnouncedRanges returns the ranges rc's cluster last announced.
func AnnouncedRanges(rc fedv1.RemoteCluster) ranges.Cluster {
	c := ranges.Cluster{ID: rc.Spec.ClusterID}
	a := rc.Status.Announced
	if a == nil {
		return c
	}
	c.Pods = parsePrefixes(a.PodCIDRs)
	c.Services = parsePrefixes(a.ServiceCIDRs)
	if w := parsePrefixes([]string{a.WireGuardSubnet}); len(w) == 1 {
		c.WireGuard = w[0]
	}
	return c
}

func check(a, b *member) error {
	if a.ranges.ID == b.ranges.ID {
		return fmt.Errorf("%w: %s and %s both have the ID %q: a cluster's ID never changes, so the cluster without it yet needs another (--cluster-id or --remote-cluster-id)", ErrRefused, a.side.Cluster.Name, b.side.Cluster.Name, a.ranges.ID)
	}
	for _, pair := range [][2]*member{{a, b}, {b, a}} {
		for _, rc := range pair[0].joined {
			if rc.Spec.ClusterID == pair[1].ranges.ID && rc.Spec.APIServer != apiServer(pair[1].side) {
				return fmt.Errorf("%w: %s is already joined to a cluster with the ID %q at %s, not at %s: unjoin it first (kilofed unjoin %s)", ErrRefused, pair[0].ranges.ID, rc.Spec.ClusterID, rc.Spec.APIServer, apiServer(pair[1].side), rc.Spec.ClusterID)
			}
		}
	}
	all := append([]ranges.Cluster{a.ranges, b.ranges}, others(a, b)...)
	var msgs []string
	for _, c := range ranges.Check(all) {
		msgs = append(msgs, c.Error())
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%w: nothing was written:\n  %s", ErrRefused, strings.Join(msgs, "\n  "))
	}
	return nil
}

func apiServer(s Side) string {
	if s.APIServer != "" {
		return s.APIServer
	}
	return s.Cluster.Config.Host
}

// link creates, in pub, the credentials for reader, and in reader the
// Secret and RemoteCluster that read pub.
func link(ctx context.Context, pub, reader *member, o Options, p *progress) error {
	name := AccountName(reader.ranges.ID)
	var objs []client.Object
	if !pub.hasID {
		objs = append(objs, &aboutv1.ClusterProperty{
			TypeMeta:   typeMeta(aboutv1.SchemeGroupVersion.String(), "ClusterProperty"),
			ObjectMeta: metav1.ObjectMeta{Name: aboutv1.ClusterIDProperty},
			Spec:       aboutv1.ClusterPropertySpec{Value: pub.ranges.ID},
		})
	}
	objs = append(objs, publisherObjects(reader.ranges.ID)...)
	if err := apply(ctx, pub.side.Cluster, objs, o.DryRun, p); err != nil {
		return err
	}
	pub.hasID = true
	token := "<token issued at join>"
	secretName := AccountName(pub.ranges.ID)
	if !o.DryRun {
		var err error
		if token, err = currentToken(ctx, reader.side.Cluster, secretName, o.TokenTTL); err != nil || token == "" {
			if token, err = IssueToken(ctx, pub.side.Cluster, name, o.TokenTTL); err != nil {
				return err
			}
		}
	}
	spec := fedv1.RemoteClusterSpec{
		ClusterID:         pub.ranges.ID,
		APIServer:         apiServer(pub.side),
		CABundle:          pub.side.Cluster.Config.CAData,
		CredentialsSecret: secretName,
		ServiceAccount:    fedv1.Namespace + "/" + name,
	}
	return apply(ctx, reader.side.Cluster, readerObjects(pub.ranges.ID, spec, token), o.DryRun, p)
}

// IssueToken returns a new token of the ServiceAccount kilofed-system/name
// of c, valid for ttl.
func IssueToken(ctx context.Context, c *kube.Cluster, name string, ttl time.Duration) (string, error) {
	secs := int64(ttl / time.Second)
	tr, err := c.Kube.CoreV1().ServiceAccounts(fedv1.Namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("issue a token for %s/%s in %s: %w", fedv1.Namespace, name, c.Name, err)
	}
	return tr.Status.Token, nil
}

// currentToken returns the token stored in c's Secret name if it is still
// valid for more than half of ttl, else "".
func currentToken(ctx context.Context, c *kube.Cluster, name string, ttl time.Duration) (string, error) {
	s, err := c.Kube.CoreV1().Secrets(fedv1.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", client.IgnoreNotFound(err)
	}
	tok := string(s.Data["token"])
	exp, err := TokenExpiry(tok)
	if err != nil || time.Until(exp) < ttl/2 {
		return "", nil
	}
	return tok, nil
}

// apply writes objs to c with server-side apply (an unchanged object stays
// unchanged), or prints them on a dry run.
func apply(ctx context.Context, c *kube.Cluster, objs []client.Object, dryRun bool, p *progress) error {
	for _, obj := range objs {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		what := kind + " " + obj.GetName()
		if obj.GetNamespace() != "" {
			what = kind + " " + obj.GetNamespace() + "/" + obj.GetName()
		}
		if dryRun {
			b, err := yaml.Marshal(redact(obj))
			if err != nil {
				return err
			}
			p.detail("would apply in %s:\n%s", c.Name, indent(string(b)))
			continue
		}
		if err := c.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s in %s: %w", what, c.Name, err)
		}
		p.detail("%s: %s applied", c.Name, what)
	}
	return nil
}

func validOrNone(p netip.Prefix) any {
	if p.IsValid() {
		return p
	}
	return "none (no agent has published a WireGuard IP yet)"
}

func parsePrefixes(ss []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}
