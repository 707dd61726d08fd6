package chart

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	aboutv1 "github.com/kilofed/kilofed/federation/apis/about/v1alpha1"
)

func controllerDeployment(t *testing.T, o Options) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	ns := o.Namespace
	if ns == "" {
		ns = "kube-system"
	}
	d := get[*appsv1.Deployment](renderObjects(t, o), "Deployment", ns, "kilofed-controller")
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(d.Spec.Template.Spec.Containers))
	}
	return d, d.Spec.Template.Spec.Containers[0]
}

func TestControllerRunsWithTheAgentsTopologyFlags(t *testing.T) {
	v := values("mesh.granularity", "full", "mesh.subnet", "10.9.0.0/16", "mesh.port", 51000, "mesh.topologyLabel", "example.com/site",
		"mesh.leaseNamespace", "mesh-leases", "mesh.leaseDuration", "5s")
	_, kgc := kg(t, Options{Values: v})
	d, c := controllerDeployment(t, Options{Values: v})
	for _, want := range []string{"--mesh-granularity=full", "--subnet=10.9.0.0/16", "--port=51000", "--topology-label=example.com/site",
		"--lease-namespace=mesh-leases", "--lease-duration=5s"} {
		if !slices.Contains(c.Args, want) || !slices.Contains(kgc.Args, want) {
			t.Errorf("%s: controller %v, kg %v", want, slices.Contains(c.Args, want), slices.Contains(kgc.Args, want))
		}
	}
	if c.Image != "ghcr.io/kilofed/kilofed-controller:"+appVersion(t) {
		t.Errorf("image %s", c.Image)
	}
	if d.Spec.Template.Spec.ServiceAccountName != "kilofed-controller" || d.Spec.Template.Spec.HostNetwork {
		t.Errorf("serviceAccount %q hostNetwork %v", d.Spec.Template.Spec.ServiceAccountName, d.Spec.Template.Spec.HostNetwork)
	}
	if c.SecurityContext == nil || c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot ||
		c.SecurityContext.Capabilities == nil || !slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		len(c.SecurityContext.Capabilities.Add) != 0 {
		t.Errorf("controller securityContext %+v: want non-root, every capability dropped", c.SecurityContext)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/health" {
		t.Errorf("liveness probe %+v", c.LivenessProbe)
	}
	if !slices.Contains(c.Args, "--listen=:1108") {
		t.Errorf("args %q: /health must answer on the pod IP for the kubelet's probe", c.Args)
	}
	_, c = controllerDeployment(t, Options{Values: values("controller.podCIDRs", []any{"10.244.0.0/16", "fd00:244::/56"},
		"controller.serviceCIDRs", []any{"10.96.0.0/12"}, "controller.poll", "2s", "controller.extraArgs", []any{"--log-level=debug"})})
	for _, want := range []string{"--pod-cidr=10.244.0.0/16,fd00:244::/56", "--service-cidr=10.96.0.0/12", "--poll=2s", "--log-level=debug"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	if r := renderObjects(t, Options{Values: values("controller.enabled", false)}); len(r.ofKind("Deployment")) != 0 {
		t.Error("controller.enabled=false still renders the Deployment")
	}
}

// controllerRules are everything federation/controller and
// cmd/kilofed-controller do with the API: the mesh's informers (Nodes,
// Peers, the heartbeat Leases), discovery (ClusterProperty, Nodes,
// ServiceCIDRs), the links (RemoteClusters and their status, the
// credentials Secrets, the mirrored Peers) and the Announcement.
// servicesyncRules are what servicesync adds (controller.servicesync.enabled):
// it reads the local ServiceExports, their Services and EndpointSlices and
// writes the exports' conditions, publishes ExportedServices in
// kilofed-system, and writes (server-side apply) and sweeps ServiceImports,
// derived Services and their EndpointSlices in the imports' namespaces,
// which it lists. Its reads are informers (servicesync.NewLocalClient):
// list and watch of each kind it reads, RemoteClusters included.
var servicesyncRules = struct{ cluster, system []rbacv1.PolicyRule }{
	cluster: []rbacv1.PolicyRule{
		{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceexports"}, Verbs: []string{"list", "watch", "patch"}},
		{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch", "create", "patch", "delete", "deletecollection"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"federation.kilofed.io"}, Resources: []string{"remoteclusters"}, Verbs: []string{"watch"}},
	},
	system: []rbacv1.PolicyRule{
		{APIGroups: []string{"federation.kilofed.io"}, Resources: []string{"exportedservices"}, Verbs: []string{"list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
	},
}

// dnsRules are what the DNS server's informers read (dns.enabled).
var dnsRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
}

var controllerRules = struct{ cluster, system, leases []rbacv1.PolicyRule }{
	cluster: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"kilo.squat.ai"}, Resources: []string{"peers"}, Verbs: []string{"list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"servicecidrs"}, Verbs: []string{"list"}},
		{APIGroups: []string{"about.k8s.io"}, Resources: []string{"clusterproperties"}, ResourceNames: []string{"cluster.clusterset.k8s.io"}, Verbs: []string{"get"}},
		{APIGroups: []string{"federation.kilofed.io"}, Resources: []string{"remoteclusters"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"federation.kilofed.io"}, Resources: []string{"remoteclusters/status"}, Verbs: []string{"update"}},
	},
	system: []rbacv1.PolicyRule{
		{APIGroups: []string{"federation.kilofed.io"}, Resources: []string{"announcements"}, ResourceNames: []string{"cluster"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "patch"}},
	},
	leases: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list", "watch"}},
	},
}

// electionRules are what the replicas' leader election uses
// (controller.leaderElection.enabled), in kilofed-system: its own Lease.
var electionRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"kilofed-controller"}, Verbs: []string{"get", "update"}},
}

func TestControllerRBACIsWhatItsCodeUses(t *testing.T) {
	for _, ns := range []string{"kube-system", "kilofed-system"} {
		t.Run(ns, func(t *testing.T) {
			r := renderObjects(t, Options{Namespace: ns})
			if d := cmp.Diff(slices.Concat(controllerRules.cluster, servicesyncRules.cluster, dnsRules), get[*rbacv1.ClusterRole](r, "ClusterRole", "", "kilofed-controller").Rules); d != "" {
				t.Errorf("ClusterRole (-want +chart):\n%s", d)
			}
			if d := cmp.Diff(slices.Concat(controllerRules.system, electionRules, servicesyncRules.system), get[*rbacv1.Role](r, "Role", "kilofed-system", "kilofed-controller").Rules); d != "" {
				t.Errorf("Role in kilofed-system (-want +chart):\n%s", d)
			}
			if d := cmp.Diff(controllerRules.leases, get[*rbacv1.Role](r, "Role", "kilo-leases", "kilofed-controller").Rules); d != "" {
				t.Errorf("Role in kilo-leases (-want +chart):\n%s", d)
			}
			sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kilofed-controller", Namespace: ns}}
			for _, b := range []struct{ kind, ns string }{{"RoleBinding", "kilofed-system"}, {"RoleBinding", "kilo-leases"}} {
				if d := cmp.Diff(sa, get[*rbacv1.RoleBinding](r, b.kind, b.ns, "kilofed-controller").Subjects); d != "" {
					t.Errorf("%s %s subjects:\n%s", b.kind, b.ns, d)
				}
			}
			if d := cmp.Diff(sa, get[*rbacv1.ClusterRoleBinding](r, "ClusterRoleBinding", "", "kilofed-controller").Subjects); d != "" {
				t.Errorf("ClusterRoleBinding subjects:\n%s", d)
			}
			if ns == "kilofed-system" && r.find("Namespace", "", "kilofed-system") != nil {
				t.Error("the release namespace kilofed-system is rendered too (helm install --create-namespace would clash)")
			}
		})
	}
}

func TestKilofedSystemNamespaceOutlivesTheRelease(t *testing.T) {
	r := renderObjects(t, Options{})
	ns := get[*corev1.Namespace](r, "Namespace", "", "kilofed-system")
	if ns.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("kilofed-system annotations %v: it holds join's credentials and must survive helm uninstall", ns.Annotations)
	}
}

func TestClusterIDValueCreatesTheClusterProperty(t *testing.T) {
	if r := renderObjects(t, Options{}); len(r.ofKind("ClusterProperty")) != 0 {
		t.Error("a ClusterProperty is rendered without cluster.id")
	}
	r := renderObjects(t, Options{Values: values("cluster.id", "prod")})
	p := get[*aboutv1.ClusterProperty](r, "ClusterProperty", "", "cluster.clusterset.k8s.io")
	if p.Spec.Value != "prod" || p.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("ClusterProperty %+v: want value prod, kept on uninstall", p)
	}
	if _, err := Render(Options{Values: values("cluster.id", "Not_A_Label")}); err == nil {
		t.Error("cluster.id Not_A_Label rendered: the ID must be a DNS-1123 label")
	}
}

func TestServiceMonitorIsOptional(t *testing.T) {
	if r := renderObjects(t, Options{}); len(r.ofKind("ServiceMonitor")) != 0 {
		t.Error("ServiceMonitor rendered by default")
	}
	r := renderObjects(t, Options{Values: values("serviceMonitor.enabled", true, "serviceMonitor.labels", map[string]any{"release": "prom"})})
	for _, name := range []string{"kilo", "kilofed-controller"} {
		sm, ok := r.find("ServiceMonitor", "kube-system", name).(*unstructured.Unstructured)
		if !ok {
			t.Fatalf("no ServiceMonitor %s:\n%s", name, r.inventory())
		}
		if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetLabels()["release"] != "prom" {
			t.Errorf("ServiceMonitor %s: %s labels %v", name, sm.GetAPIVersion(), sm.GetLabels())
		}
		svc := get[*corev1.Service](r, "Service", "kube-system", name+"-metrics")
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" {
			t.Errorf("Service %s-metrics ports %+v", name, svc.Spec.Ports)
		}
	}
}

func appVersion(t *testing.T) string {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return c.Metadata.AppVersion
}

func TestChartNeedsKubernetesWhoseProjectedTokensCarryTheNodeName(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	// ServiceAccountTokenPodNodeInfo is GA in 1.32: a pod's projected token
	// carries authentication.kubernetes.io/node-name, which the node-scoped
	// policy needs (without it every agent write is refused).
	if c.Metadata.KubeVersion != ">=1.32.0-0" {
		t.Errorf("kubeVersion %q, want >=1.32.0-0", c.Metadata.KubeVersion)
	}
}

func TestServicesyncOffDropsItsFlagAndRules(t *testing.T) {
	_, c := controllerDeployment(t, Options{})
	if !slices.Contains(c.Args, "--servicesync=true") {
		t.Errorf("args %q lack --servicesync=true", c.Args)
	}
	_, c = controllerDeployment(t, Options{Values: values("controller.servicesync.withdrawAfter", "5m")})
	if !slices.Contains(c.Args, "--withdraw-after=5m") {
		t.Errorf("args %q lack --withdraw-after=5m", c.Args)
	}
	o := Options{Values: values("controller.servicesync.enabled", false)}
	_, c = controllerDeployment(t, o)
	if !slices.Contains(c.Args, "--servicesync=false") {
		t.Errorf("args %q lack --servicesync=false", c.Args)
	}
	r := renderObjects(t, o)
	if d := cmp.Diff(slices.Concat(controllerRules.cluster, dnsRules), get[*rbacv1.ClusterRole](r, "ClusterRole", "", "kilofed-controller").Rules); d != "" {
		t.Errorf("ClusterRole without servicesync (-want +chart):\n%s", d)
	}
	if d := cmp.Diff(slices.Concat(controllerRules.system, electionRules), get[*rbacv1.Role](r, "Role", "kilofed-system", "kilofed-controller").Rules); d != "" {
		t.Errorf("Role in kilofed-system without servicesync (-want +chart):\n%s", d)
	}
}

// TestControllerReplicasElectALeader proves that the default Deployment runs
// two replicas that elect a leader through their own Lease (rolled, the new
// replica waiting for the Lease), and that without leader election the
// chart falls back to one replica at a time (Recreate) and drops the Lease
// rules.
func TestControllerReplicasElectALeader(t *testing.T) {
	d, c := controllerDeployment(t, Options{})
	for _, want := range []string{"--leader-elect=true", "--leader-elect-namespace=kilofed-system", "--leader-elect-identity=$(POD_NAME)",
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	if *d.Spec.Replicas != 2 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("replicas %d strategy %s, want 2 RollingUpdate", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "POD_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("env %+v, want POD_NAME from metadata.name", c.Env)
	}
	o := Options{Values: values("controller.leaderElection.enabled", false, "controller.replicas", 1)}
	d, c = controllerDeployment(t, o)
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect") }) || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("without leader election: args %q strategy %s, want no --leader-elect and Recreate", c.Args, d.Spec.Strategy.Type)
	}
	if d := cmp.Diff(slices.Concat(controllerRules.system, servicesyncRules.system), get[*rbacv1.Role](renderObjects(t, o), "Role", "kilofed-system", "kilofed-controller").Rules); d != "" {
		t.Errorf("Role in kilofed-system without leader election (-want +chart):\n%s", d)
	}
}
