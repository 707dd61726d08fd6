//go:build linux

package kubelet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// hostNetnsAlias names this machine's own network namespace
// (/run/netns/kfl-kt-host-*, a bind mount of it), so that hostNetwork pods
// reach the envtest API server on 127.0.0.1.
func hostNetnsAlias(t *testing.T) string {
	t.Helper()
	name := "kfl-kt-host-" + randHex(3)
	p := filepath.Join(netnsRunDir, name)
	if err := os.MkdirAll(netnsRunDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/ns/net", p, "", unix.MS_BIND, ""); err != nil {
		os.Remove(p)
		t.Fatalf("bind the host netns on %s: %v", p, err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(p, unix.MNT_DETACH)
		_ = os.Remove(p)
	})
	return name
}

func TestPrivilegedServiceAccountTokenAndVolumes(t *testing.T) {
	hostNs := hostNetnsAlias(t)
	root := t.TempDir()
	h := startHarness(t, func(c *Config) { c.NodeNetns, c.RootDir = hostNs, root })
	kubectl := filepath.Join(labBins(t), "kubectl")
	ctx := context.Background()
	// The mount point of the test's hostPath is created on this machine
	// (empty: the data goes to the node's root).
	dataDir := "/var/lib/kfl-kt-" + randHex(3)
	t.Cleanup(func() { _ = os.Remove(dataDir) })

	// A ServiceAccount that may read ConfigMaps only.
	if _, err := h.client.CoreV1().ServiceAccounts(h.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.RbacV1().Roles(h.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.RbacV1().RoleBindings(h.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: h.ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().ConfigMaps(h.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().Secrets(h.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"key": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(h.rest.Host)
	if err != nil {
		t.Fatal(err)
	}
	// A hostNetwork pod like the chart's agent: its token, a hostPath, an
	// emptyDir, a ConfigMap and a Secret. No kube-proxy runs here, so the
	// kubernetes Service's variables are replaced by the API server's
	// address (container env wins over them, as in Kubernetes).
	agent := hostPod("agent", corev1.Container{Image: "nicolaka/netshoot", Args: []string{"sleep", "3600"},
		Env: []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: api.Hostname()}, {Name: "KUBERNETES_SERVICE_PORT", Value: api.Port()}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: dataDir}, {Name: "scratch", MountPath: "/scratch"},
			{Name: "cfg", MountPath: "/etc/kfl-kt", ReadOnly: true}, {Name: "sec", MountPath: "/etc/kfl-kt-secret"},
		}})
	agent.Spec.HostNetwork, agent.Spec.ServiceAccountName = true, "reader"
	agent.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dataDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
	}
	h.create(t, agent)
	// A pod without a token (hostNetwork too: the node netns is this
	// machine's here, where pod veths must not go; the other privileged
	// tests exec into pod netns with mounts).
	plain := hostPod("plain", corev1.Container{Image: "nicolaka/netshoot", Args: []string{"sleep", "3600"},
		VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/kfl-kt", ReadOnly: true}}})
	plain.Spec.AutomountServiceAccountToken, plain.Spec.HostNetwork = ptr.To(false), true
	plain.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
	h.create(t, plain)
	agentUID := waitPodReady(t, h.client, h.ns, "agent").UID
	waitPodReady(t, h.client, h.ns, "plain")

	sa := ServiceAccountMountPath
	h.api.check(t, h.ns, "agent", func(ex apiExec) {
		if out, code := ex("cat", sa+"/namespace"); code != 0 || out != h.ns {
			t.Errorf("namespace file = %d %q, want %q", code, out, h.ns)
		}
		if out, code := ex("cat", sa+"/ca.crt"); code != 0 || out != string(h.rest.CAData) {
			t.Errorf("ca.crt = %d %q, want the cluster CA", code, out)
		}
		// The token is bound to the pod.
		out, code := ex("cat", sa+"/token")
		parts := strings.Split(out, ".")
		if code != 0 || len(parts) != 3 {
			t.Fatalf("token = %d %q", code, out)
		}
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var claims struct {
			Sub string `json:"sub"`
			K8s struct {
				Pod struct{ Name, UID string } `json:"pod"`
			} `json:"kubernetes.io"`
		}
		if err := json.Unmarshal(payload, &claims); err != nil || claims.K8s.Pod.Name != "agent" || claims.K8s.Pod.UID != string(agentUID) ||
			claims.Sub != "system:serviceaccount:"+h.ns+":reader" {
			t.Errorf("token claims %s (%v), want bound to pod agent %s of reader", payload, err, agentUID)
		}
		// In-cluster config works unchanged: what the Role allows, and no more.
		incluster := "env HOME=/nonexistent " + kubectl + " "
		if out, code := ex("sh", "-c", incluster+"get configmaps -o name"); code != 0 || !strings.Contains(out, "configmap/cfg") {
			t.Errorf("in-cluster kubectl get configmaps = %d %q", code, out)
		}
		if out, code := ex("sh", "-c", incluster+"get secrets 2>&1"); code == 0 || !strings.Contains(out, "Forbidden") ||
			!strings.Contains(out, "system:serviceaccount:"+h.ns+":reader") {
			t.Errorf("in-cluster kubectl get secrets = %d %q, want Forbidden for reader", code, out)
		}
		// Volumes, seen by exec (it enters the container's mount namespace).
		if out, code := ex("cat", "/etc/kfl-kt/mode", "/etc/kfl-kt-secret/key"); code != 0 || out != "fasts3cret" {
			t.Errorf("configMap and secret volumes = %d %q", code, out)
		}
		if _, code := ex("touch", "/etc/kfl-kt/new"); code == 0 {
			t.Error("wrote into a readOnly mount")
		}
		if out, code := ex("sh", "-c", "echo kept > "+dataDir+"/f && echo x > /scratch/x && cat /scratch/x"); code != 0 || out != "x\n" {
			t.Errorf("hostPath and emptyDir writes = %d %q", code, out)
		}
	}, "")
	// The hostPath is the node's own: under its root, not this machine's path.
	if b, err := os.ReadFile(filepath.Join(root, "hostpath", dataDir, "f")); err != nil || string(b) != "kept\n" {
		t.Errorf("hostPath file under the node root = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "f")); err == nil {
		t.Errorf("hostPath %s was written on this machine's own path", dataDir)
	}

	h.api.check(t, h.ns, "plain", func(ex apiExec) {
		if _, code := ex("test", "-e", sa+"/token"); code == 0 {
			t.Error("automountServiceAccountToken false: a token is mounted")
		}
		if out, code := ex("cat", "/etc/kfl-kt/mode"); code != 0 || out != "fast" {
			t.Errorf("plain's ConfigMap volume = %d %q", code, out)
		}
	}, "")

	// Deleting the pods removes their volume folders; hostPath data stays.
	for _, name := range []string{"agent", "plain"} {
		if err := h.client.CoreV1().Pods(h.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30e9, "pod volume folders removed", func() error {
		entries, _ := os.ReadDir(filepath.Join(root, "pods"))
		if len(entries) != 0 {
			return os.ErrExist
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(root, "hostpath", dataDir, "f")); err != nil {
		t.Errorf("hostPath data gone with the pod: %v", err)
	}
}
