package k8s_test

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
	"github.com/kilofed/kilofed/mesh/topology"
)

// agentConfig returns a rest.Config with a token of the kube-system/kilo
// ServiceAccount bound to node (nil: bound to nothing), as the agent's pod
// on that node gets one.
func agentConfig(t *testing.T, admin *rest.Config, kube kubernetes.Interface, node string) *rest.Config {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}
	if node != "" {
		n, err := kube.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}
	}
	tok, err := kube.CoreV1().ServiceAccounts("kube-system").CreateToken(t.Context(), "kilo", req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of kube-system/kilo bound to node %q: %v", node, err)
	}
	return &rest.Config{Host: admin.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}}
}

// TestAdmissionNodeScoped checks, on a real API server with mesh/config's
// RBAC and admission policy and real bound ServiceAccount tokens, that an
// agent writes only its own node's state: RBAC alone lets node a's agent
// rewrite node b's key; the policy refuses that and every other write
// outside a's published annotations and a's Lease, refuses tokens bound to
// no node, and lets the real Client do all an agent does.
func TestAdmissionNodeScoped(t *testing.T) {
	env := k8stest.Start(t)
	ctx := t.Context()
	applyFile(t, env.Config, filepath.Join("..", "config", "rbac", "agent.yaml"))
	kube := kubernetes.NewForConfigOrDie(env.Config)
	makeNode(t, kube, "a", map[string]string{k8s.KeyAnnotation: keyA}, nil, "10.0.1.1")
	makeNode(t, kube, "b", map[string]string{k8s.KeyAnnotation: keyB, k8s.LocationAnnotation: "paris"}, map[string]string{"topology.kubernetes.io/region": "eu"}, "10.0.1.2")
	agentA := kubernetes.NewForConfigOrDie(agentConfig(t, env.Config, kube, "a"))

	t.Run("RBAC alone lets an agent rewrite another node's key", func(t *testing.T) {
		b, err := k8s.New(ctx, k8s.Config{RESTConfig: agentConfig(t, env.Config, kube, "a")})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.PublishNode(ctx, "b", k8s.NodeAnnotations{Key: mustKey(t, keyC)}); err != nil {
			t.Fatalf("without the policy: %v", err)
		}
	})

	applyFile(t, env.Config, filepath.Join("..", "config", "admission", "node-scoped.yaml"))
	if err := k8stest.WaitTrustEnforced(ctx, agentA, "b"); err != nil {
		t.Fatal(err)
	}
	t.Run("node a's token", func(t *testing.T) { k8stest.CheckTrust(t, ctx, kube, agentA, "a", "b") })

	t.Run("a token bound to no node writes nothing", func(t *testing.T) {
		unbound := kubernetes.NewForConfigOrDie(agentConfig(t, env.Config, kube, ""))
		for _, tc := range k8stest.TrustCases() {
			if !tc.Allowed {
				continue
			}
			a, _ := kube.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
			b, _ := kube.CoreV1().Nodes().Get(ctx, "b", metav1.GetOptions{})
			if err := tc.Do(ctx, unbound, a, b); err == nil {
				t.Errorf("%s: allowed with a token bound to no node", tc.Name)
			}
		}
	})

	t.Run("the agent's Client works under the policy", func(t *testing.T) {
		b, err := k8s.New(ctx, k8s.Config{RESTConfig: agentConfig(t, env.Config, kube, "a"), LeaseDuration: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Heartbeat(ctx, "a"); err != nil {
			t.Errorf("heartbeat: %v", err)
		}
		if err := b.Heartbeat(ctx, "a"); err != nil {
			t.Errorf("second heartbeat: %v", err)
		}
		pub := k8s.NodeAnnotations{Key: mustKey(t, keyA), Endpoint: ":51820", Granularity: topology.LocationGranularity}
		if err := b.PublishNode(ctx, "a", pub); err != nil {
			t.Errorf("publish its own node: %v", err)
		}
		if err := b.ReleaseHeartbeat(ctx, "a"); err != nil {
			t.Errorf("release: %v", err)
		}
		if err := b.Heartbeat(ctx, "b"); err == nil {
			t.Error("node a's agent renewed node b's Lease")
		}
	})

	t.Run("the agent's location election works under the policy", func(t *testing.T) {
		b, err := k8s.New(ctx, k8s.Config{RESTConfig: agentConfig(t, env.Config, kube, "a"), LeaseDuration: time.Second, Election: k8s.ElectionLocation})
		if err != nil {
			t.Fatal(err)
		}
		b.FollowLocation("geneva")
		eventually(t, 10*time.Second, "the election Lease's watch synced", func() bool { return b.LocationLease("geneva").Known })
		s, err := b.HoldLocation(ctx, "geneva", "a", b.LocationLease("geneva"), 0)
		if err != nil {
			t.Fatalf("take: %v", err)
		}
		if s, err = b.HoldLocation(ctx, "geneva", "a", s, 0); err != nil {
			t.Errorf("renew: %v", err)
		}
		if err := b.PublishLeads(ctx, "a", k8s.Leads{Term: s.Term, Location: "geneva"}.String()); err != nil {
			t.Errorf("publish its lead: %v", err)
		}
		if err := b.ReleaseLocation(ctx, "geneva", "a"); err != nil {
			t.Errorf("release: %v", err)
		}
		if err := b.PublishLeads(ctx, "a", ""); err != nil {
			t.Errorf("withdraw its lead: %v", err)
		}
		if err := b.PublishLeads(ctx, "b", "9:paris"); err == nil {
			t.Error("node a's agent published a lead on node b")
		}
	})
}

// TestAdmissionPolicyListsThePublishedAnnotations checks that the policy
// lets an agent write exactly the annotations that PublishNode writes.
func TestAdmissionPolicyListsThePublishedAnnotations(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "config", "admission", "node-scoped.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var expr string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if u.GetKind() != "ValidatingAdmissionPolicy" || u.GetName() != "kilo-node-scoped-nodes" {
			continue
		}
		vars, _, _ := unstructured.NestedSlice(u.Object, "spec", "variables")
		for _, v := range vars {
			if m, ok := v.(map[string]any); ok && m["name"] == "published" {
				expr, _ = m["expression"].(string)
			}
		}
	}
	var got []string
	for _, m := range regexp.MustCompile(`'([^']+)'`).FindAllStringSubmatch(expr, -1) {
		got = append(got, m[1])
	}
	values, err := k8s.NodeAnnotations{}.Values()
	if err != nil {
		t.Fatal(err)
	}
	values[k8s.LeadsAnnotation] = "" // published by the election (PublishLeads)
	want := slices.Sorted(maps.Keys(values))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the policy's published annotations = %v, PublishNode writes %v", got, want)
	}
}
