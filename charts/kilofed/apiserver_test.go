package chart

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/kilofed/kilofed/dns/watch"
	"github.com/kilofed/kilofed/dns/zone"
	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/controller"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/servicesync"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// startAPIServer starts a real API server (the lab's etcd and
// kube-apiserver, through envtest) with nothing installed.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	dir := k8stest.BinsDir()
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no kube-apiserver in %s: %v (make lab-bins)", dir, err)
		}
		t.Skipf("no kube-apiserver in %s (make lab-bins)", dir)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Logf("stop the API server: %v", err)
		}
	})
	return cfg
}

// install applies the manifests in order with server-side apply, as
// kubectl apply --server-side -f does, waiting for each kind to be served
// (CRDs are established a moment after they are created).
func install(ctx context.Context, t *testing.T, cfg *rest.Config, manifests string) {
	t.Helper()
	for _, doc := range strings.Split(manifests, "\n---\n") {
		if strings.TrimSpace(stripComments(strings.TrimPrefix(doc, "---\n"))) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := client.New(cfg, client.Options{})
			if err == nil {
				err = c.Patch(ctx, u, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership)
			}
			if err == nil {
				break
			}
			if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
				t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// tokenConfig returns a config with a token of the ServiceAccount ns/name,
// bound to node when node is set, as a pod on that node gets one.
func tokenConfig(ctx context.Context, t *testing.T, admin *rest.Config, kc kubernetes.Interface, ns, name, node string) *rest.Config {
	t.Helper()
	ttl := int64(3600)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}
	if node != "" {
		n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}
	}
	tok, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	return &rest.Config{Host: admin.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}}
}

// addNode creates a ready Node with an internal IP, a pod CIDR and a key.
func addNode(ctx context.Context, t *testing.T, kc kubernetes.Interface, name, ip, podCIDR, key string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{k8s.KeyAnnotation: key}},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}}}
	n, err := kc.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if _, err := kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestChartOnARealAPIServer installs the chart's render (release in
// namespace kilo, cluster ID prod) on a real API server, which validates
// every object (CEL of the policies included), then runs with the chart's
// ServiceAccounts' own tokens: the agent of node a may write its own node's
// state and nothing of node b's (the mesh's trust cases), and the real
// federation controller announces this cluster and follows a joined cluster
// with only the chart's RBAC for the controller, which reads no Secret
// outside kilofed-system and writes no Node; servicesync publishes this
// cluster's exports and the DNS zone's informers sync with the same token.
func TestChartOnARealAPIServer(t *testing.T) {
	cfg := startAPIServer(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kilo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := Render(Options{Namespace: "kilo", Values: values("cluster.id", "prod"), CRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	install(ctx, t, cfg, m)
	addNode(ctx, t, kc, "a", "10.0.1.1", "10.42.1.0/24", "4jtvKgjTuwyokGD20xKD+dprGSbpy61QRApiAO0kM20=")
	addNode(ctx, t, kc, "b", "10.0.1.2", "10.42.2.0/24", "Lw+uB7XCFqhSLtDC+0q6Y+L6XRUkypc7OWZ8+RU6yQ0=")

	t.Run("the agent writes only its own node's state", func(t *testing.T) {
		agentA := kubernetes.NewForConfigOrDie(tokenConfig(ctx, t, cfg, kc, "kilo", "kilo", "a"))
		if err := k8stest.WaitTrustEnforced(ctx, agentA, "b"); err != nil {
			t.Fatal(err)
		}
		k8stest.CheckTrust(t, ctx, kc, agentA, "a", "b")
	})

	t.Run("the controller runs with the chart's RBAC", func(t *testing.T) {
		ctlCfg := tokenConfig(ctx, t, cfg, kc, "kilo", "kilofed-controller", "")
		ctlKube := kubernetes.NewForConfigOrDie(ctlCfg)
		if _, err := ctlKube.CoreV1().Secrets("kilo").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("list Secrets of kilo: %v, want Forbidden", err)
		}
		patch := []byte(`{"metadata":{"annotations":{"kilo.squat.ai/key":"x"}}}`)
		if _, err := ctlKube.CoreV1().Nodes().Patch(ctx, "a", "application/merge-patch+json", patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("patch a Node: %v, want Forbidden", err)
		}
		// A joined cluster whose API server does not answer: the link reads
		// its credentials and writes its status.
		admin, err := client.New(cfg, client.Options{Scheme: kube.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: "kilofed-remote-dr"}, Data: map[string][]byte{"token": []byte("t")}}
		rc := &fedv1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr"}, Spec: fedv1.RemoteClusterSpec{
			ClusterID: "dr", APIServer: "https://127.0.0.1:1", CredentialsSecret: secret.Name, ServiceAccount: fedv1.Namespace + "/kilofed-remote-prod"}}
		for _, o := range []client.Object{secret, rc} {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		local, err := kube.New("local", ctlCfg)
		if err != nil {
			t.Fatal(err)
		}
		mesh, err := k8s.New(ctx, k8s.Config{RESTConfig: ctlCfg})
		if err != nil {
			t.Fatalf("the mesh's informers with the controller's token: %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ctl, err := controller.New(cctx, controller.Config{Local: local, Mesh: mesh, Topology: topology.Options{Subnet: topology.DefaultSubnet, Port: topology.DefaultPort},
			Poll: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("controller with the chart's RBAC: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- ctl.Run(cctx) }()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var a fedv1.Announcement
			errA := admin.Get(ctx, client.ObjectKey{Namespace: fedv1.Namespace, Name: fedv1.AnnouncementName}, &a)
			var r fedv1.RemoteCluster
			errR := admin.Get(ctx, client.ObjectKey{Name: "dr"}, &r)
			if errA == nil && errR == nil && a.Spec.ClusterID == "prod" && meta.FindStatusCondition(r.Status.Conditions, fedv1.Ready) != nil {
				t.Logf("announced %d gateways; dr: %s", len(a.Spec.Gateways), r.Status.APIReachable)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s: Announcement %v (%+v), RemoteCluster dr %v (conditions %+v)", errA, a.Spec, errR, r.Status.Conditions)
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})

	t.Run("the replicas elect a leader with the chart's RBAC and touch no other Lease", func(t *testing.T) {
		ctlKube := kubernetes.NewForConfigOrDie(tokenConfig(ctx, t, cfg, kc, "kilo", "kilofed-controller", ""))
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		led := make(chan struct{})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: "kilofed-controller"},
				Client: ctlKube.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: "replica-1"}},
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 200 * time.Millisecond, ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(led) }, OnStoppedLeading: func() {}},
		})
		if err != nil {
			t.Fatal(err)
		}
		go le.Run(lctx)
		select {
		case <-led:
		case <-lctx.Done():
			t.Fatal("the controller's token never took the Lease kilofed-system/kilofed-controller")
		}
		cancel()
		other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: fedv1.Namespace, Name: "someone-elses"}}
		if _, err := kc.CoordinationV1().Leases(fedv1.Namespace).Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ctlKube.CoordinationV1().Leases(fedv1.Namespace).Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("update another Lease of %s: %v, want Forbidden", fedv1.Namespace, err)
		}
		if _, err := ctlKube.CoordinationV1().Leases("kilo-leases").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("create a heartbeat Lease in kilo-leases: %v, want Forbidden", err)
		}
	})

	t.Run("servicesync runs with the chart's RBAC", func(t *testing.T) {
		admin, err := client.New(cfg, client.Options{Scheme: servicesync.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		objs := []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
			&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}},
		}
		for _, o := range objs {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		local, err := client.New(tokenConfig(ctx, t, cfg, kc, "kilo", "kilofed-controller", ""), client.Options{Scheme: servicesync.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := servicesync.New(servicesync.Config{Local: local, ClusterID: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		// The joined cluster dr does not answer: its part is unknown, the
		// local export is published and its conditions written.
		if err := s.Step(ctx); err != nil {
			t.Fatalf("servicesync with the controller's token: %v", err)
		}
		var es ssv1.ExportedService
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ssv1.Namespace, Name: ssv1.ObjectName("app", "web")}, &es); err != nil {
			t.Errorf("ExportedService of app/web: %v", err)
		}
		var ex mcsv1beta1.ServiceExport
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "app", Name: "web"}, &ex); err != nil || len(ex.Status.Conditions) == 0 {
			t.Errorf("ServiceExport app/web: %v, conditions %+v", err, ex.Status.Conditions)
		}
		if err := local.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "x"}}); !apierrors.IsForbidden(err) {
			t.Errorf("delete a Secret in app: %v, want Forbidden", err)
		}
	})
	t.Run("the DNS zone's informers sync with the chart's RBAC", func(t *testing.T) {
		ctlCfg := tokenConfig(ctx, t, cfg, kc, "kilo", "kilofed-controller", "")
		dctx, cancel := context.WithCancel(ctx)
		defer cancel()
		feed, err := watch.Start(dctx, watch.Config{Kube: kubernetes.NewForConfigOrDie(ctlCfg), MCS: mcsclient.NewForConfigOrDie(ctlCfg), Zone: zone.New(zone.Config{})})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !feed.HasSynced() {
			if time.Now().After(deadline) {
				t.Fatal("the ServiceImport and EndpointSlice informers did not sync in 20 s with the controller's token")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
