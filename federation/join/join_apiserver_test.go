package join_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	aboutv1 "github.com/kilofed/kilofed/federation/apis/about/v1alpha1"
	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/join"
	"github.com/kilofed/kilofed/federation/kube"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// startCluster starts a real API server (the lab's binaries, through
// envtest) with the mesh's and the federation's CRDs and one Node carrying
// podCIDR and the WireGuard IP wgIP, as a cluster named name.
func startCluster(t *testing.T, name, podCIDR, wgIP string) *kube.Cluster {
	t.Helper()
	dir := k8stest.BinsDir()
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no kube-apiserver in %s: %v", dir, err)
		}
		t.Skipf("no kube-apiserver in %s (make lab-bins)", dir)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     []string{k8stest.CRDDir(), filepath.Join("..", "config", "crd"), filepath.Join("..", "..", "servicesync", "config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the API server of %s: %v", name, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := kube.New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Annotations: map[string]string{k8s.WireGuardIPAnnotation: wgIP}},
		Spec:       corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
	}
	if err := c.Client.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	return c
}

// objects lists everything join or unjoin may write in c, one line each
// with its resourceVersion.
func objects(ctx context.Context, t *testing.T, c *kube.Cluster) []string {
	t.Helper()
	var out []string
	add := func(kind string, list client.ObjectList) {
		if err := c.Client.List(ctx, list); err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		items, err := metaItems(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			out = append(out, fmt.Sprintf("%s %s/%s %s", kind, o.GetNamespace(), o.GetName(), o.GetResourceVersion()))
		}
	}
	add("Namespace", &corev1.NamespaceList{})
	add("ServiceAccount", &corev1.ServiceAccountList{})
	add("Secret", &corev1.SecretList{})
	add("Role", &rbacv1.RoleList{})
	add("RoleBinding", &rbacv1.RoleBindingList{})
	add("ClusterProperty", &aboutv1.ClusterPropertyList{})
	add("RemoteCluster", &fedv1.RemoteClusterList{})
	add("Peer", &kilov1.PeerList{})
	sort.Strings(out)
	return out
}

func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	var out []metav1.Object
	switch l := list.(type) {
	case *corev1.NamespaceList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ServiceAccountList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.SecretList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *rbacv1.RoleList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *rbacv1.RoleBindingList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *aboutv1.ClusterPropertyList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *fedv1.RemoteClusterList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *kilov1.PeerList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unknown list %T", list)
	}
	return out, nil
}

// TestJoinAgainstRealAPIServers runs join, a refused join, a second join,
// the token's scope and unjoin against two real API servers (no nodes,
// no mesh: the lab's e2e/federation tests the data plane).
func TestJoinAgainstRealAPIServers(t *testing.T) {
	ctx := context.Background()
	prod := startCluster(t, "prod", "10.10.1.0/24", "10.5.0.1/16")
	dr := startCluster(t, "dr", "10.11.1.0/24", "10.6.0.1/16")
	// Both API servers of envtest serve the same Service range: the
	// flags say what the lab's clusters have.
	side := func(c *kube.Cluster, svc string) join.Side {
		return join.Side{Cluster: c, Ranges: discover.Options{ServiceCIDRs: []netip.Prefix{mustPrefix(svc)}}}
	}
	opts := func() join.Options {
		return join.Options{Local: side(prod, "10.20.0.0/16"), Remote: side(dr, "10.21.0.0/16"), Out: &bytes.Buffer{}}
	}

	t.Run("RefusedJoinWritesNothing", func(t *testing.T) {
		before := [2][]string{objects(ctx, t, prod), objects(ctx, t, dr)}
		for name, mutate := range map[string]func(*join.Options){
			"pod CIDR":         func(o *join.Options) { o.Local.Ranges.PodCIDRs = []netip.Prefix{mustPrefix("10.11.0.0/17")} },
			"service CIDR":     func(o *join.Options) { o.Remote.Ranges.ServiceCIDRs = []netip.Prefix{mustPrefix("10.20.0.0/24")} },
			"WireGuard subnet": func(o *join.Options) { o.Local.Ranges.PodCIDRs = []netip.Prefix{mustPrefix("10.6.0.0/16")} },
			"cluster ID":       func(o *join.Options) { o.Remote.ID = "prod" },
		} {
			o := opts()
			mutate(&o)
			err := join.Join(ctx, o)
			if !errors.Is(err, join.ErrRefused) {
				t.Errorf("%s: join = %v, want refused", name, err)
				continue
			}
			t.Logf("%s: %v", name, err)
			for _, w := range []string{"prod", "dr"} {
				if !strings.Contains(err.Error(), w) && name != "cluster ID" {
					t.Errorf("%s: the refusal does not name %s", name, w)
				}
			}
		}
		if d := cmp.Diff(before, [2][]string{objects(ctx, t, prod), objects(ctx, t, dr)}); d != "" {
			t.Errorf("refused joins wrote:\n%s", d)
		}
	})

	var joined [2][]string
	t.Run("JoinThenJoinAgainChangesNothing", func(t *testing.T) {
		o := opts()
		if err := join.Join(ctx, o); err != nil {
			t.Fatalf("join: %v\n%s", err, o.Out)
		}
		t.Logf("join:\n%s", o.Out)
		joined = [2][]string{objects(ctx, t, prod), objects(ctx, t, dr)}
		o = opts()
		if err := join.Join(ctx, o); err != nil {
			t.Fatalf("second join: %v\n%s", err, o.Out)
		}
		if d := cmp.Diff(joined, [2][]string{objects(ctx, t, prod), objects(ctx, t, dr)}); d != "" {
			t.Errorf("the second join changed:\n%s", d)
		}
	})

	t.Run("TokenReadsOnlyTheAnnouncementAndExportedServices", func(t *testing.T) {
		ann := &fedv1.Announcement{ObjectMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: fedv1.AnnouncementName}, Spec: fedv1.AnnouncementSpec{ClusterID: "prod"}}
		if err := prod.Client.Create(ctx, ann); err != nil {
			t.Fatal(err)
		}
		asDR, cfg := tokenClient(ctx, t, dr, prod)
		if err := asDR.Client.Get(ctx, client.ObjectKeyFromObject(ann), &fedv1.Announcement{}); err != nil {
			t.Errorf("the token cannot read the Announcement: %v", err)
		}
		exported := &ssv1.ExportedService{ObjectMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: ssv1.ObjectName("default", "echo")},
			Spec: ssv1.ExportedServiceSpec{ClusterID: "prod", Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, ExportCreated: metav1.Now()}}
		admin, asDRc := withServiceTypes(t, prod.Config), withServiceTypes(t, cfg)
		if err := admin.Create(ctx, exported); err != nil {
			t.Fatal(err)
		}
		if err := asDRc.List(ctx, &ssv1.ExportedServiceList{}, client.InNamespace(fedv1.Namespace)); err != nil {
			t.Errorf("the token cannot list the ExportedServices: %v", err)
		}
		if err := asDRc.Get(ctx, client.ObjectKeyFromObject(exported), &ssv1.ExportedService{}); err != nil {
			t.Errorf("the token cannot read an ExportedService: %v", err)
		}
		if _, err := join.IssueToken(ctx, asDR, join.AccountName("dr"), join.DefaultTokenTTL); err != nil {
			t.Errorf("the token cannot renew itself: %v", err)
		}
		c := asDR.Client
		for what, err := range map[string]error{
			"list Secrets":            c.List(ctx, &corev1.SecretList{}, client.InNamespace(fedv1.Namespace)),
			"list Nodes":              c.List(ctx, &corev1.NodeList{}),
			"create a Peer":           c.Create(ctx, &kilov1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: kilov1.PeerSpec{AllowedIPs: []string{"10.99.0.0/16"}, PublicKey: "kKfOoFVeD0ESbBW+6lFYVo5lsaN2CfGSI1uD8H6rcV0="}}),
			"delete a RemoteCluster":  c.Delete(ctx, &fedv1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr"}}),
			"delete a Secret":         c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: join.AccountName("dr")}}),
			"delete its Role":         c.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: join.AccountName("dr")}}),
			"delete the Announcement": c.Delete(ctx, ann.DeepCopy()),
			"create an ExportedService": asDRc.Create(ctx, &ssv1.ExportedService{ObjectMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: "default.other"},
				Spec: ssv1.ExportedServiceSpec{ClusterID: "dr", Namespace: "default", Name: "other", Type: ssv1.ClusterSetIP, ExportCreated: metav1.Now()}}),
			"delete an ExportedService": asDRc.Delete(ctx, exported.DeepCopy()),
			"patch an ExportedService":  asDRc.Patch(ctx, exported.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"type":"Headless"}}`))),
			"list ServiceExports":       asDRc.List(ctx, &mcsv1beta1.ServiceExportList{}),
			"list EndpointSlices":       c.List(ctx, &discoveryv1.EndpointSliceList{}),
			"token for another SA":      issueErr(join.IssueToken(ctx, asDR, "default", join.DefaultTokenTTL)),
		} {
			if !apierrors.IsForbidden(err) {
				t.Errorf("the token tried to %s: %v, want forbidden", what, err)
			}
		}
	})

	t.Run("UnjoinLocalOnlyRemovesThisSideAndRevokesTheOthersToken", func(t *testing.T) {
		asProd, _ := tokenClient(ctx, t, prod, dr)
		readAnnouncements := func() error {
			return asProd.Client.List(ctx, &fedv1.AnnouncementList{}, client.InNamespace(fedv1.Namespace))
		}
		if err := readAnnouncements(); err != nil {
			t.Fatalf("before: prod's token cannot read dr's Announcements: %v", err)
		}
		prodBefore := objects(ctx, t, prod)

		var out bytes.Buffer
		err := join.UnjoinLocal(ctx, dr, "nosuch", &out)
		if err == nil || !strings.Contains(err.Error(), "nosuch") || !strings.Contains(err.Error(), "links to [prod]") {
			t.Errorf("unjoin --local-only of an unknown cluster = %v, want an error naming it and the RemoteClusters [prod]", err)
		}
		if err := join.UnjoinLocal(ctx, dr, "prod", &out); err != nil {
			t.Fatalf("unjoin --local-only: %v\n%s", err, &out)
		}
		t.Logf("unjoin --local-only:\n%s", &out)
		for _, line := range objects(ctx, t, dr) {
			if strings.Contains(line, join.AccountName("prod")) || strings.HasPrefix(line, "RemoteCluster ") {
				t.Errorf("dr after unjoin --local-only: %s", line)
			}
		}
		if d := cmp.Diff(prodBefore, objects(ctx, t, prod)); d != "" {
			t.Errorf("unjoin --local-only in dr changed prod:\n%s", d)
		}
		// Its ServiceAccount is gone, and with it its Role's binding.
		if err := readAnnouncements(); !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
			t.Errorf("after: prod's token reads dr's Announcements: %v, want unauthorized or forbidden", err)
		}
		if err := join.UnjoinLocal(ctx, dr, "prod", &out); err == nil {
			t.Errorf("a second unjoin --local-only succeeded: want no link to prod")
		}
	})

	t.Run("UnjoinRemovesEverything", func(t *testing.T) {
		user := &kilov1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "cluster-dr-ovhcloud"}, Spec: kilov1.PeerSpec{AllowedIPs: []string{"10.12.0.0/16"}, PublicKey: "kKfOoFVeD0ESbBW+6lFYVo5lsaN2CfGSI1uD8H6rcV0="}}
		if err := prod.Client.Create(ctx, user); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := join.Unjoin(ctx, prod, dr, &out); err != nil {
			t.Fatalf("unjoin: %v\n%s", err, &out)
		}
		t.Logf("unjoin:\n%s", &out)
		for _, c := range []*kube.Cluster{prod, dr} {
			for _, line := range objects(ctx, t, c) {
				if strings.Contains(line, "kilofed-remote-") || strings.HasPrefix(line, "RemoteCluster ") {
					t.Errorf("%s after unjoin: %s", c.Name, line)
				}
			}
		}
		if err := prod.Client.Get(ctx, client.ObjectKeyFromObject(user), &kilov1.Peer{}); err != nil {
			t.Errorf("unjoin removed the user Peer: %v", err)
		}
	})
}

// tokenClient returns a client of issuer that uses the token holder keeps
// for it (its Secret kilofed-remote-<issuer>), and its config.
func tokenClient(ctx context.Context, t *testing.T, holder, issuer *kube.Cluster) (*kube.Cluster, *rest.Config) {
	t.Helper()
	var s corev1.Secret
	if err := holder.Client.Get(ctx, client.ObjectKey{Namespace: fedv1.Namespace, Name: join.AccountName(issuer.Name)}, &s); err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(issuer.Config)
	cfg.BearerToken = string(s.Data["token"])
	c, err := kube.New(issuer.Name+"-as-"+holder.Name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// withServiceTypes returns a client of cfg that knows servicesync's types.
func withServiceTypes(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	s := kube.Scheme()
	if err := ssv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := mcsv1beta1.Install(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func issueErr(_ string, err error) error { return err }

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
