package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// variants are value sets the tests render besides the defaults.
var variants = []struct {
	name      string
	namespace string
	values    map[string]any
}{
	{name: "defaults"},
	{name: "namespace kilo", namespace: "kilo"},
	{name: "namespace kilofed-system", namespace: "kilofed-system"},
	{name: "full mesh, kernel WireGuard, no encapsulation", values: values(
		"mesh.granularity", "full", "mesh.subnet", "10.40.0.0/16", "mesh.port", 51821,
		"agent.encapsulate", "never", "agent.mtu", "1380", "agent.wireguard", "kernel")},
	{name: "userspace WireGuard, CNI, cluster ID, DNS IP, CoreDNS, ServiceMonitor", values: values(
		"agent.wireguard", "userspace", "agent.cni.enabled", true, "cluster.id", "prod",
		"dns.clusterIP", "10.96.0.53", "coredns.enabled", true, "serviceMonitor.enabled", true,
		"agent.serviceCIDRs", []any{"10.96.0.0/12"}, "controller.podCIDRs", []any{"10.244.0.0/16"},
		"dns.upstreams", []any{"10.96.0.10"}, "controller.servicesync.withdrawAfter", "5m")},
	{name: "no DNS, no servicesync", values: values("dns.enabled", false, "controller.servicesync.enabled", false)},
	{name: "no controller, no admission", values: values("controller.enabled", false, "admission.nodeScoped", false)},
}

func TestChartLintsCleanWithEveryVariant(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ns := v.namespace
			if ns == "" {
				ns = "kube-system"
			}
			l := lint.All(".", v.values, ns, false)
			for _, m := range l.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

func TestEveryVariantDecodesStrictlyIntoKubernetesTypes(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := renderObjects(t, Options{Namespace: v.namespace, Values: v.values, CRDs: true})
			if len(r.objs) == 0 {
				t.Fatal("nothing rendered")
			}
			seen := map[string]bool{}
			for _, o := range r.objs {
				k := o.GetObjectKind().GroupVersionKind().Kind + " " + o.GetNamespace() + "/" + o.GetName()
				if seen[k] {
					t.Errorf("%s rendered twice", k)
				}
				seen[k] = true
			}
		})
	}
}

func TestDefaultsInstallWhatOneClusterNeeds(t *testing.T) {
	r := renderObjects(t, Options{CRDs: true})
	var have []string
	for _, o := range r.objs {
		have = append(have, o.GetObjectKind().GroupVersionKind().Kind+" "+o.GetNamespace()+"/"+o.GetName())
	}
	var crds []string
	for _, o := range r.ofKind("CustomResourceDefinition") {
		crds = append(crds, o.GetName())
	}
	// The Multi-Cluster Services CRDs come with servicesync/config/crd.
	for _, want := range []string{"peers.kilo.squat.ai", "clusterproperties.about.k8s.io", "announcements.federation.kilofed.io", "remoteclusters.federation.kilofed.io"} {
		if !slices.Contains(crds, want) {
			t.Errorf("CRD %s not installed (have %v)", want, crds)
		}
	}
	if files, _ := filepath.Glob("crds/*.yaml"); len(crds) != len(files) {
		t.Errorf("%d CRDs rendered from %d files in crds/", len(crds), len(files))
	}
	have = slices.DeleteFunc(have, func(s string) bool { return strings.HasPrefix(s, "CustomResourceDefinition ") })
	want := []string{
		"Namespace /kilo-leases",
		"Namespace /kilofed-system",
		"ServiceAccount kube-system/kilo",
		"ServiceAccount kube-system/kilofed-controller",
		"ClusterRole /kilo",
		"ClusterRole /kilofed-controller",
		"ClusterRoleBinding /kilo",
		"ClusterRoleBinding /kilofed-controller",
		"Role kilo-leases/kilo-heartbeat",
		"Role kilo-leases/kilofed-controller",
		"Role kilofed-system/kilofed-controller",
		"RoleBinding kilo-leases/kilo-heartbeat",
		"RoleBinding kilo-leases/kilofed-controller",
		"RoleBinding kilofed-system/kilofed-controller",
		"DaemonSet kube-system/kilo",
		"Deployment kube-system/kilofed-controller",
		"ValidatingAdmissionPolicy /kilo-node-scoped-nodes",
		"ValidatingAdmissionPolicy /kilo-node-scoped-leases",
		"ValidatingAdmissionPolicyBinding /kilo-node-scoped-nodes",
		"ValidatingAdmissionPolicyBinding /kilo-node-scoped-leases",
	}
	want = append(want, dnsObjects...)
	if d := cmp.Diff(sorted(want), sorted(have)); d != "" {
		t.Errorf("default install (-want +have):\n%s", d)
	}
}

func TestPlainManifestsAreAFreshRenderOfTheChart(t *testing.T) {
	want, err := PlainManifests()
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(root, "deploy", "kilofed.yaml"))
	if err != nil {
		t.Fatalf("%v: run make manifests", err)
	}
	if string(have) != want {
		t.Errorf("deploy/kilofed.yaml is not the chart's render (run make manifests; never edit it by hand):\n%s", cmp.Diff(want, string(have)))
	}
	if !strings.HasPrefix(string(have), PlainManifestsHeader) {
		t.Error("deploy/kilofed.yaml does not say it is generated")
	}
	decodeAll(t, string(have))
}

func TestChartCopiesEqualTheirSources(t *testing.T) {
	copies, err := Copies(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, c := range copies {
		want[c.Chart] = true
		src, err := os.ReadFile(filepath.Join(root, c.Source))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.ReadFile(c.Chart)
		if err != nil {
			t.Errorf("%s missing (copy of %s): run make manifests (go generate ./charts/kilofed, then the render)", c.Chart, c.Source)
			continue
		}
		if string(src) != string(dst) {
			t.Errorf("%s differs from %s: run make manifests (go generate ./charts/kilofed, then the render)", c.Chart, c.Source)
		}
	}
	crds, _ := filepath.Glob("crds/*.yaml")
	for _, f := range crds {
		if !want[filepath.ToSlash(f)] {
			t.Errorf("%s has no source in %v: run make manifests (go generate ./charts/kilofed, then the render)", f, SourceDirs)
		}
	}
}

func TestReadmeValuesTableIsUpToDate(t *testing.T) {
	vals, err := os.ReadFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	table, err := ValuesTable(vals)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := WithTable(string(readme), table)
	if err != nil {
		t.Fatal(err)
	}
	if want != string(readme) {
		t.Errorf("README.md's values table is stale: run make manifests\n%s", cmp.Diff(want, string(readme)))
	}
	for _, key := range []string{"mesh.granularity", "mesh.subnet", "agent.encapsulate", "mesh.port", "agent.mtu",
		"agent.wireguard", "cluster.id", "agent.image.repository", "controller.image.repository", "agent.resources", "controller.resources"} {
		if !strings.Contains(table, "| `"+key+"` |") {
			t.Errorf("values table has no %s", key)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestValuesSchemaRefusesUnknownModes(t *testing.T) {
	for _, kv := range [][2]any{{"mesh.granularity", "mesh"}, {"agent.encapsulate", "sometimes"}, {"agent.wireguard", "boringtun"},
		{"agent.tunnel", "gre"}, {"agent.mtu", "big"}, {"mesh.port", 70000}} {
		if _, err := Render(Options{Values: values(kv[0], kv[1])}); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s=%v: %v, want a schema error", kv[0], kv[1], err)
		}
	}
}
