package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// kg returns the rendered kg DaemonSet and its container.
func kg(t *testing.T, o Options) (*appsv1.DaemonSet, corev1.Container) {
	t.Helper()
	ns := o.Namespace
	if ns == "" {
		ns = "kube-system"
	}
	ds := get[*appsv1.DaemonSet](renderObjects(t, o), "DaemonSet", ns, "kilo")
	if len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("kilo has %d containers, want 1", len(ds.Spec.Template.Spec.Containers))
	}
	return ds, ds.Spec.Template.Spec.Containers[0]
}

func TestAgentDaemonSetIsKilosOnHostNetworkWithOnlyNetworkCapabilities(t *testing.T) {
	ds, c := kg(t, Options{})
	pod := ds.Spec.Template.Spec
	if ds.Labels["app.kubernetes.io/name"] != "kilo" || ds.Spec.Template.Labels["app.kubernetes.io/name"] != "kilo" ||
		ds.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "kilo" {
		t.Errorf("labels %v, pod %v, selector %v: want app.kubernetes.io/name=kilo on all", ds.Labels, ds.Spec.Template.Labels, ds.Spec.Selector.MatchLabels)
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0].Operator != corev1.TolerationOpExists || pod.Tolerations[0].Key != "" {
		t.Errorf("tolerations %+v: want every taint tolerated", pod.Tolerations)
	}
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v dnsPolicy %s", pod.HostNetwork, pod.DNSPolicy)
	}
	if pod.ServiceAccountName != "kilo" || pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Errorf("serviceAccount %q automount %v: the agent needs kube-system/kilo's bound (projected) token", pod.ServiceAccountName, pod.AutomountServiceAccountToken)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("kg has no securityContext.capabilities")
	}
	if d := cmp.Diff([]corev1.Capability{"NET_ADMIN", "NET_RAW"}, sc.Capabilities.Add); d != "" {
		t.Errorf("capabilities added (-want +have):\n%s", d)
	}
	if d := cmp.Diff([]corev1.Capability{"ALL"}, sc.Capabilities.Drop); d != "" {
		t.Errorf("capabilities dropped (-want +have):\n%s", d)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("kg is privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("kg allows privilege escalation")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("kg's root file system is writable")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["NODE_NAME"] != "spec.nodeName" || env["NODE_IP"] != "status.hostIP" {
		t.Errorf("downward API env %v: want NODE_NAME=spec.nodeName, NODE_IP=status.hostIP", env)
	}
	for _, want := range []string{"--hostname=$(NODE_NAME)", "--mesh-granularity=location", "--subnet=10.4.0.0/16", "--port=51820",
		"--encapsulate=always", "--mtu=auto", "--wireguard=auto", "--listen=$(NODE_IP):1107", "--lease-namespace=kilo-leases"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("kg args %q lack %s", c.Args, want)
		}
	}
	if c.Image != "ghcr.io/kilofed/kg:"+appVersion(t) {
		t.Errorf("image %s", c.Image)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/health" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/ready" {
		t.Errorf("probes %+v %+v: want /health and /ready", c.LivenessProbe, c.ReadinessProbe)
	}
}

func TestAgentTunDeviceFollowsTheWireGuardMode(t *testing.T) {
	for _, tt := range []struct {
		mode string
		tun  bool
	}{{"auto", true}, {"userspace", true}, {"kernel", false}} {
		t.Run(tt.mode, func(t *testing.T) {
			ds, c := kg(t, Options{Values: values("agent.wireguard", tt.mode)})
			if !slices.Contains(c.Args, "--wireguard="+tt.mode) {
				t.Errorf("args %q lack --wireguard=%s", c.Args, tt.mode)
			}
			var tun *corev1.Volume
			for i, v := range ds.Spec.Template.Spec.Volumes {
				if v.HostPath != nil && v.HostPath.Path == "/dev/net/tun" {
					tun = &ds.Spec.Template.Spec.Volumes[i]
				}
			}
			if (tun != nil) != tt.tun {
				t.Fatalf("/dev/net/tun mounted %v, want %v", tun != nil, tt.tun)
			}
			if tun != nil && (tun.HostPath.Type == nil || *tun.HostPath.Type != corev1.HostPathCharDev) {
				t.Errorf("/dev/net/tun hostPath type %v, want CharDevice", tun.HostPath.Type)
			}
			mounts := map[string]bool{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = true
			}
			if mounts["/dev/net/tun"] != tt.tun || !mounts["/var/lib/kilo"] || !mounts["/var/run/wireguard"] || !mounts["/run/xtables.lock"] || mounts["/etc/cni/net.d"] {
				t.Errorf("mounts %v", mounts)
			}
		})
	}
}

func TestAgentArgsFollowValues(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   []string
		absent []string
	}{
		{name: "mesh", values: values("mesh.granularity", "cross", "mesh.subnet", "10.9.0.0/16", "mesh.port", 51000,
			"mesh.topologyLabel", "example.com/site", "mesh.leaseNamespace", "mesh-leases", "mesh.leaseDuration", "5s"),
			want: []string{"--mesh-granularity=cross", "--subnet=10.9.0.0/16", "--port=51000", "--topology-label=example.com/site",
				"--lease-namespace=mesh-leases", "--lease-duration=5s"}},
		{name: "agent", values: values("agent.encapsulate", "crosssubnet", "agent.tunnel", "vxlan", "agent.mtu", "1420",
			"agent.interface", "wg0", "agent.logLevel", "debug", "agent.meshKeepalive", "10s", "agent.resyncPeriod", "1m",
			"agent.serviceCIDRs", []any{"10.96.0.0/12", "fd00:96::/108"}, "agent.internalCIDRs", []any{"10.0.0.0/8"},
			"agent.iptablesForwardRules", true, "agent.prioritisePrivateAddresses", true, "agent.extraArgs", []any{"--serve-graph"}),
			want: []string{"--encapsulate=crosssubnet", "--tunnel=vxlan", "--mtu=1420", "--interface=wg0", "--log-level=debug",
				"--mesh-keepalive=10s", "--resync-period=1m", "--service-cidr=10.96.0.0/12,fd00:96::/108", "--internal-cidr=10.0.0.0/8",
				"--iptables-forward-rules=true", "--prioritise-private-addresses=true", "--serve-graph"}},
		{name: "clean-up defaults", want: []string{"--clean-up=true", "--clean-up-interface=false"}},
		{name: "interface removed on exit", values: values("agent.cleanUpInterface", true), want: []string{"--clean-up-interface=true"}},
		{name: "cni off by default", want: []string{"--cni=false"}, absent: []string{"--cni=true"}},
		{name: "cni on", values: values("agent.cni.enabled", true), want: []string{"--cni=true", "--cni-path=/etc/cni/net.d/10-kilo.conflist"}},
	}
	ds, _ := kg(t, Options{Values: values("agent.cni.enabled", true)})
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil && v.HostPath.Path == "/etc/cni/net.d" }) {
		t.Error("agent.cni.enabled does not mount /etc/cni/net.d")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := kg(t, Options{Values: tt.values})
			for _, w := range tt.want {
				if !slices.Contains(c.Args, w) {
					t.Errorf("args %q lack %s", c.Args, w)
				}
			}
			for _, a := range tt.absent {
				if slices.Contains(c.Args, a) {
					t.Errorf("args %q have %s", c.Args, a)
				}
			}
		})
	}
	ds, c := kg(t, Options{Values: values("mesh.port", 51000)})
	var udp bool
	for _, p := range c.Ports {
		udp = udp || (p.Protocol == corev1.ProtocolUDP && p.ContainerPort == 51000)
	}
	if !udp {
		t.Errorf("ports %+v lack UDP 51000", c.Ports)
	}
	if ds.Spec.Template.Spec.HostNetwork != true {
		t.Error("hostNetwork off")
	}
}

// meshRules returns the rules of a ClusterRole or Role in one of the mesh's RBAC files.
func meshRules(t *testing.T, kind, name string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "mesh/config/rbac/agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeAll(t, string(b))
	for _, o := range r.objs {
		if o.GetObjectKind().GroupVersionKind().Kind == kind && o.GetName() == name {
			switch o := o.(type) {
			case *rbacv1.ClusterRole:
				return o.Rules
			case *rbacv1.Role:
				return o.Rules
			}
		}
	}
	t.Fatalf("mesh/config/rbac/agent.yaml has no %s %s", kind, name)
	return nil
}

func TestAgentRBACIsTheMeshs(t *testing.T) {
	for _, ns := range []string{"kube-system", "kilo"} {
		t.Run(ns, func(t *testing.T) {
			r := renderObjects(t, Options{Namespace: ns})
			cr := get[*rbacv1.ClusterRole](r, "ClusterRole", "", "kilo")
			if d := cmp.Diff(meshRules(t, "ClusterRole", "kilo"), cr.Rules); d != "" {
				t.Errorf("ClusterRole kilo differs from mesh/config/rbac/agent.yaml (-mesh +chart):\n%s", d)
			}
			role := get[*rbacv1.Role](r, "Role", "kilo-leases", "kilo-heartbeat")
			if d := cmp.Diff(meshRules(t, "Role", "kilo-heartbeat"), role.Rules); d != "" {
				t.Errorf("Role kilo-heartbeat differs from mesh/config/rbac/agent.yaml (-mesh +chart):\n%s", d)
			}
			sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kilo", Namespace: ns}}
			crb := get[*rbacv1.ClusterRoleBinding](r, "ClusterRoleBinding", "", "kilo")
			rb := get[*rbacv1.RoleBinding](r, "RoleBinding", "kilo-leases", "kilo-heartbeat")
			if d := cmp.Diff(sa, crb.Subjects); d != "" {
				t.Errorf("ClusterRoleBinding subjects:\n%s", d)
			}
			if d := cmp.Diff(sa, rb.Subjects); d != "" {
				t.Errorf("RoleBinding subjects:\n%s", d)
			}
		})
	}
}

func TestNodeScopedPolicyIsTheMeshsForTheReleasesAgent(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, AdmissionCopy.Source))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"kube-system", "kilo"} {
		t.Run(ns, func(t *testing.T) {
			want := decodeAll(t, strings.ReplaceAll(string(src), AdmissionServiceAccount, "system:serviceaccount:"+ns+":kilo"))
			r := renderObjects(t, Options{Namespace: ns})
			for _, w := range want.objs {
				kind := w.GetObjectKind().GroupVersionKind().Kind
				h := r.find(kind, "", w.GetName())
				if h == nil {
					t.Errorf("chart lacks %s %s", kind, w.GetName())
					continue
				}
				switch w := w.(type) {
				case *admissionv1.ValidatingAdmissionPolicy:
					if d := cmp.Diff(w.Spec, h.(*admissionv1.ValidatingAdmissionPolicy).Spec); d != "" {
						t.Errorf("%s differs from the mesh's (-mesh +chart):\n%s", w.Name, d)
					}
					if !strings.Contains(w.Spec.MatchConditions[0].Expression, "system:serviceaccount:"+ns+":kilo") {
						t.Errorf("%s does not match the release's agent: %s", w.Name, w.Spec.MatchConditions[0].Expression)
					}
				case *admissionv1.ValidatingAdmissionPolicyBinding:
					if d := cmp.Diff(w.Spec, h.(*admissionv1.ValidatingAdmissionPolicyBinding).Spec); d != "" {
						t.Errorf("%s differs from the mesh's (-mesh +chart):\n%s", w.Name, d)
					}
				}
			}
			if len(r.ofKind("ValidatingAdmissionPolicy")) != 2 {
				t.Errorf("%d policies rendered, want the mesh's 2", len(r.ofKind("ValidatingAdmissionPolicy")))
			}
		})
	}
	if r := renderObjects(t, Options{Values: values("admission.nodeScoped", false)}); len(r.ofKind("ValidatingAdmissionPolicy")) != 0 {
		t.Error("admission.nodeScoped=false still renders the policies")
	}
}
