package controller

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	aboutv1 "github.com/kilofed/kilofed/federation/apis/about/v1alpha1"
	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/federation/mirror"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

const (
	keyA = "IgDTEvasUvxisSAmfBKh8ZNGbl0rX2MJYvChs7NTYHs="
	keyB = "GQfCyIlpLrGtUaUsGmqg0HRFWaqbDbbW7Ddz3u4b2Xk="
)

// fixture is a local cluster "prod" joined to "dr", whose API server is a
// fake client that can be made to fail.
type fixture struct {
	t      *testing.T
	local  client.Client
	remote client.Client
	down   bool // the remote API server does not answer
	link   *link
}

func newFixture(t *testing.T, ann fedv1.AnnouncementSpec, localObjs ...client.Object) *fixture {
	t.Helper()
	f := &fixture{t: t}
	s := kube.Scheme()
	objs := append([]client.Object{
		&aboutv1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: aboutv1.ClusterIDProperty}, Spec: aboutv1.ClusterPropertySpec{Value: "prod"}},
		&fedv1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr", UID: "uid-dr"}, Spec: fedv1.RemoteClusterSpec{
			ClusterID: "dr", APIServer: "https://dr.invalid:6443", CredentialsSecret: "kilofed-remote-dr", ServiceAccount: "kilofed-system/kilofed-remote-prod"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kilofed-remote-dr", Namespace: fedv1.Namespace}, Data: map[string][]byte{"token": []byte("tok")}},
	}, localObjs...)
	f.local = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&fedv1.RemoteCluster{}).Build()
	f.remote = fake.NewClientBuilder().WithScheme(s).WithObjects(&fedv1.Announcement{
		ObjectMeta: metav1.ObjectMeta{Name: fedv1.AnnouncementName, Namespace: fedv1.Namespace}, Spec: ann}).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if f.down {
				return errors.New("dial tcp 203.0.113.9:6443: connect: connection refused")
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	c := &Controller{cfg: Config{
		Local: &kube.Cluster{Name: "prod", Client: f.local}, Resync: time.Hour, Poll: time.Second,
		Ranges: discover.Options{
			PodCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.10.0.0/16")},
			ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")},
		},
		Dial: func(string, *rest.Config) (*kube.Cluster, error) {
			return &kube.Cluster{Name: "dr", Client: f.remote}, nil
		},
	}, log: slog.New(slog.DiscardHandler), id: "prod", links: map[string]*link{}}
	c.cfg.Topology.Subnet = netip.MustParsePrefix("10.4.0.0/16")
	f.link = newLink(c, "dr")
	return f
}

func drAnnouncement() fedv1.AnnouncementSpec {
	return fedv1.AnnouncementSpec{
		ClusterID: "dr", PodCIDRs: []string{"10.11.0.0/16"}, ServiceCIDRs: []string{"10.21.0.0/16"}, WireGuardSubnet: "10.5.0.0/16",
		Gateways: []fedv1.Gateway{
			{Location: "ovh-gra", Node: "dr-1", PublicKey: keyA, Endpoint: "198.51.100.10:51820", AllowedIPs: []string{"10.11.0.0/24", "10.21.0.0/16", "10.5.0.1/32"}},
			{Location: "ovh-sbg", Node: "dr-3", PublicKey: keyB, AllowedIPs: []string{"10.11.1.0/24", "10.5.0.2/32"}},
		},
	}
}

func (f *fixture) step() {
	f.t.Helper()
	if err := f.link.step(context.Background()); err != nil {
		f.t.Fatalf("step: %v", err)
	}
}

func (f *fixture) peers() map[string]kilov1.Peer {
	f.t.Helper()
	var list kilov1.PeerList
	if err := f.local.List(context.Background(), &list); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]kilov1.Peer{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

func (f *fixture) condition(t string) metav1.Condition {
	f.t.Helper()
	var rc fedv1.RemoteCluster
	if err := f.local.Get(context.Background(), client.ObjectKey{Name: "dr"}, &rc); err != nil {
		f.t.Fatal(err)
	}
	c := meta.FindStatusCondition(rc.Status.Conditions, t)
	if c == nil {
		f.t.Fatalf("RemoteCluster dr has no %s condition: %+v", t, rc.Status.Conditions)
	}
	return *c
}

func TestLinkMirrorsGatewaysAsOwnedLabelledPeers(t *testing.T) {
	f := newFixture(t, drAnnouncement())
	f.step()
	ps := f.peers()
	gra, ok := ps["dr-ovh-gra"]
	if !ok || len(ps) != 2 {
		t.Fatalf("Peers = %v, want dr-ovh-gra and dr-ovh-sbg", ps)
	}
	if gra.Spec.PublicKey != keyA || gra.Labels[mirror.LabelRemote] != "dr" || len(gra.OwnerReferences) != 1 || gra.OwnerReferences[0].Name != "dr" {
		t.Errorf("Peer dr-ovh-gra = %+v, want dr's key, the remote label and RemoteCluster dr as owner", gra)
	}
	for _, ct := range []string{fedv1.CredentialsValid, fedv1.APIReachable, fedv1.CIDRsDisjoint} {
		if c := f.condition(ct); c.Status != metav1.ConditionTrue {
			t.Errorf("%s = %s (%s), want True", ct, c.Status, c.Message)
		}
	}
	if c := f.condition(fedv1.TunnelsUp); c.Status != metav1.ConditionFalse || c.Reason != "NoHandshake" {
		t.Errorf("TunnelsUp = %s/%s, want False/NoHandshake before any handshake", c.Status, c.Reason)
	}
}

func TestLinkKeepsPeersWhileTheRemoteAPIIsDown(t *testing.T) {
	f := newFixture(t, drAnnouncement())
	f.step()
	before := f.peers()
	f.down = true
	f.step()
	f.step()
	after := f.peers()
	if len(after) != len(before) {
		t.Fatalf("Peers changed during the outage: %d before, %d after", len(before), len(after))
	}
	for name, p := range before {
		if after[name].ResourceVersion != p.ResourceVersion {
			t.Errorf("Peer %s was rewritten during the outage", name)
		}
	}
	c := f.condition(fedv1.APIReachable)
	if c.Status != metav1.ConditionFalse || c.Reason != "Unreachable" || !strings.Contains(c.Message, "no answer since") || !strings.Contains(c.Message, "connection refused") {
		t.Errorf("APIReachable = %s/%s %q, want False/Unreachable saying since when and why", c.Status, c.Reason, c.Message)
	}
	f.down = false
	f.step()
	if c := f.condition(fedv1.APIReachable); c.Status != metav1.ConditionTrue {
		t.Errorf("APIReachable after the outage = %s, want True", c.Status)
	}
}

func TestLinkSweepsAGoneGatewayButNeverAUserPeer(t *testing.T) {
	user := &kilov1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "cluster-dr-ovhcloud"}, Spec: kilov1.PeerSpec{PublicKey: keyB, AllowedIPs: []string{"10.99.0.0/16"}}}
	f := newFixture(t, drAnnouncement(), user)
	f.step()
	var ann fedv1.Announcement
	ctx := context.Background()
	if err := f.remote.Get(ctx, client.ObjectKey{Namespace: fedv1.Namespace, Name: fedv1.AnnouncementName}, &ann); err != nil {
		t.Fatal(err)
	}
	ann.Spec.Gateways = ann.Spec.Gateways[:1]
	if err := f.remote.Update(ctx, &ann); err != nil {
		t.Fatal(err)
	}
	f.step()
	ps := f.peers()
	if _, ok := ps["dr-ovh-sbg"]; ok {
		t.Error("the Peer of a gateway dr no longer announces is still there")
	}
	if _, ok := ps["cluster-dr-ovhcloud"]; !ok {
		t.Error("the user's Peer was deleted")
	}
}

func TestLinkNeverRoutesARemoteRangeOverlappingALocalOne(t *testing.T) {
	a := drAnnouncement()
	a.PodCIDRs = append(a.PodCIDRs, "10.10.64.0/18")
	a.Gateways[0].AllowedIPs = append(a.Gateways[0].AllowedIPs, "10.10.64.0/24")
	f := newFixture(t, a)
	f.step()
	for _, p := range f.peers() {
		for _, ip := range p.Spec.AllowedIPs {
			if netip.MustParsePrefix(ip).Overlaps(netip.MustParsePrefix("10.10.0.0/16")) {
				t.Errorf("Peer %s routes %s into prod's pod range", p.Name, ip)
			}
		}
	}
	c := f.condition(fedv1.CIDRsDisjoint)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "dr's pod range 10.10.64.0/18 overlaps prod's pod range 10.10.0.0/16") {
		t.Errorf("CIDRsDisjoint = %s %q, want False naming both ranges", c.Status, c.Message)
	}
	if r := f.condition(fedv1.Ready); r.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %s with a refused range, want False", r.Status)
	}
}

func TestLinkRefusesAClusterThatIsNotTheJoinedOne(t *testing.T) {
	a := drAnnouncement()
	a.ClusterID = "impostor"
	f := newFixture(t, a)
	f.step()
	if ps := f.peers(); len(ps) != 0 {
		t.Errorf("Peers written for a cluster announcing another ID: %v", ps)
	}
	if c := f.condition(fedv1.CIDRsDisjoint); c.Reason != "WrongCluster" {
		t.Errorf("CIDRsDisjoint reason = %s, want WrongCluster", c.Reason)
	}
}
