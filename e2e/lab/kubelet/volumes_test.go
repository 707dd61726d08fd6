package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestHostPathSource(t *testing.T) {
	k := &kubelet{rootDir: "/node-a"}
	for in, want := range map[string]string{
		"/var/lib/kilo":       "/node-a/hostpath/var/lib/kilo",
		"/var/run/wireguard":  "/node-a/hostpath/var/run/wireguard",
		"/etc/cni/net.d/":     "/node-a/hostpath/etc/cni/net.d",
		"/var/lib/../../etc":  "/node-a/hostpath/etc",
		"/dev/net/tun":        "/dev/net/tun",
		"/dev":                "/dev",
		"/lib/modules":        "/lib/modules",
		"/sys/fs/bpf":         "/sys/fs/bpf",
		"/run/xtables.lock":   "/run/xtables.lock",
		"/devices-not-really": "/node-a/hostpath/devices-not-really",
	} {
		if got := k.hostPathSource(in); got != want {
			t.Errorf("hostPathSource(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRenewTimeIs80PercentOfTheLife(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got, want := renewTime(t0, t0.Add(time.Hour)), t0.Add(48*time.Minute); !got.Equal(want) {
		t.Errorf("renewTime = %v, want %v", got, want)
	}
}

func TestReconcileMountsVolumes(t *testing.T) {
	tk := newTestKubelet(t)
	ctx := context.Background()
	if _, err := tk.cfg.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"a.conf": "A", "b.conf": "B"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.cfg.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"key": []byte("K")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := corev1.Container{Image: "ghcr.io/kilofed/kg", Command: []string{"sh"}, VolumeMounts: []corev1.VolumeMount{
		{Name: "kilo-dir", MountPath: "/var/lib/kilo"},
		{Name: "tun", MountPath: "/dev/net/tun"},
		{Name: "scratch", MountPath: "/scratch"},
		{Name: "cfg", MountPath: "/etc/kt", ReadOnly: true},
		{Name: "sec", MountPath: "/etc/kt-secret/key", SubPath: "key"},
	}}
	pod := reconcilePod("agent", "u1", corev1.RestartPolicyAlways, c)
	pod.Spec.ServiceAccountName = "kilo"
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "kilo-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kilo", Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
		{Name: "tun", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/dev/null", Type: ptr.To(corev1.HostPathCharDev)}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: []corev1.KeyToPath{{Key: "a.conf", Path: "sub/a.conf"}}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr.To[int32](0o400)}}},
	}
	tk.cfg.ImageBinDir = t.TempDir()
	tk.apply(t, pod)
	if len(tk.procs.argv) != 1 {
		t.Fatalf("status %s, argv %v", tk.status(t, "default", "agent"), tk.procs.argv)
	}
	vol := filepath.Join(tk.rootDir, "pods", "u1")
	want := []string{"ip", "netns", "exec", PodNetns("kfl-node-a", "default", "agent"), "/lab", "workload", "mount-exec",
		"--bind", filepath.Join(tk.rootDir, "hostpath/var/lib/kilo") + ":/var/lib/kilo",
		"--bind", "/dev/null:/dev/net/tun",
		"--bind", vol + "/scratch:/scratch",
		"--bind", vol + "/cfg:/etc/kt:ro",
		"--bind", vol + "/sec/key:/etc/kt-secret/key",
		"--bind", vol + "/kube-api-access-kfl:" + ServiceAccountMountPath + ":ro",
		"--", "sh"}
	if diff := cmp.Diff(want, tk.procs.argv[0]); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	files := map[string]string{
		"cfg/sub/a.conf":                "A",
		"sec/key":                       "K",
		"kube-api-access-kfl/token":     "token-of-default/agent",
		"kube-api-access-kfl/ca.crt":    "test CA\n",
		"kube-api-access-kfl/namespace": "default",
	}
	for f, want := range files {
		if b, err := os.ReadFile(filepath.Join(vol, f)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", f, b, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(vol, "sec/key")); err != nil || st.Mode().Perm() != 0o400 {
		t.Errorf("secret file mode %v, %v; want 0400", st.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(vol, "cfg/b.conf")); err == nil {
		t.Error("configmap key not in items was written")
	}
	if st, err := os.Stat(filepath.Join(tk.rootDir, "hostpath/var/lib/kilo")); err != nil || !st.IsDir() {
		t.Errorf("hostPath DirectoryOrCreate not created under the node root: %v", err)
	}
	// The token request was bound to the pod and asked for the admission's default life.
	var req *authenticationv1.TokenRequest
	for _, a := range tk.cfg.Client.(*fake.Clientset).Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "token" {
			req = ca.GetObject().(*authenticationv1.TokenRequest)
			if ca.(k8stesting.CreateActionImpl).Name != "kilo" {
				t.Errorf("token of service account %q, want kilo", ca.(k8stesting.CreateActionImpl).Name)
			}
		}
	}
	if req == nil || req.Spec.BoundObjectRef == nil || req.Spec.BoundObjectRef.Name != "agent" || req.Spec.BoundObjectRef.UID != "u1" ||
		*req.Spec.ExpirationSeconds != defaultTokenSeconds {
		t.Errorf("token request %+v, want bound to pod agent u1 for %d s", req, defaultTokenSeconds)
	}

	// Deleting the pod removes its volumes, not the hostPath data.
	p := pod.DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: tk.clock}
	tk.apply(t, p)
	if _, err := os.Stat(vol); !os.IsNotExist(err) {
		t.Errorf("pod volume folder left after deletion: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tk.rootDir, "hostpath/var/lib/kilo")); err != nil {
		t.Errorf("hostPath data removed with the pod: %v", err)
	}
}

func TestReconcileVolumeErrors(t *testing.T) {
	tests := []struct {
		name    string
		vol     corev1.VolumeSource
		wantMsg string
	}{
		{name: "missing configmap", vol: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}},
			wantMsg: `configmap "nope"`},
		{name: "hostPath Directory missing", vol: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/none", Type: ptr.To(corev1.HostPathDirectory)}},
			wantMsg: "hostPath /var/lib/none"},
		{name: "hostPath CharDevice that is a folder", vol: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/dev", Type: ptr.To(corev1.HostPathCharDev)}},
			wantMsg: "is not of type CharDevice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := newTestKubelet(t)
			pod := reconcilePod("p", "u1", corev1.RestartPolicyAlways, corev1.Container{Image: "nicolaka/netshoot",
				VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}})
			pod.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: tt.vol}}
			tk.apply(t, pod)
			got, _ := tk.cfg.Client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
			w := got.Status.ContainerStatuses[0].State.Waiting
			if len(tk.procs.argv) != 0 || w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, tt.wantMsg) {
				t.Errorf("argv %v, state %+v; want waiting CreateContainerConfigError with %q", tk.procs.argv, got.Status.ContainerStatuses[0].State, tt.wantMsg)
			}
		})
	}
}

func TestNoServiceAccountMountWhenAutomountIsFalse(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{ServiceAccountName: "default", AutomountServiceAccountToken: ptr.To(false)}}
	vols, mounts := withServiceAccountVolume(pod, &corev1.Container{})
	if len(vols) != 0 || len(mounts) != 0 {
		t.Errorf("automount false: volumes %v mounts %v", vols, mounts)
	}
	// No ServiceAccount named (the admission did not run): no token to bind.
	if vols, mounts := withServiceAccountVolume(&corev1.Pod{}, &corev1.Container{}); len(vols) != 0 || len(mounts) != 0 {
		t.Errorf("no serviceAccountName: volumes %v mounts %v", vols, mounts)
	}
	pod = &corev1.Pod{Spec: corev1.PodSpec{ServiceAccountName: "default"}}
	if vols, mounts := withServiceAccountVolume(pod, &corev1.Container{}); len(vols) != 1 || len(mounts) != 1 || mounts[0].MountPath != ServiceAccountMountPath {
		t.Errorf("default account: volumes %v mounts %v, want the kube-api-access volume", vols, mounts)
	}
	// A pod the ServiceAccount admission already gave its volume keeps it.
	m := corev1.VolumeMount{Name: "kube-api-access-x1", MountPath: ServiceAccountMountPath, ReadOnly: true}
	pod = &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "kube-api-access-x1"}}}}
	vols, mounts = withServiceAccountVolume(pod, &corev1.Container{VolumeMounts: []corev1.VolumeMount{m}})
	if len(vols) != 1 || !cmp.Equal(mounts, []corev1.VolumeMount{m}) {
		t.Errorf("admission's volume: volumes %v mounts %v", vols, mounts)
	}
}

func TestTokenRenewedAfter80PercentOfItsLife(t *testing.T) {
	tk := newTestKubelet(t)
	waits := make(chan time.Duration, 4)
	fire := make(chan time.Time)
	tk.after = func(d time.Duration) <-chan time.Time { waits <- d; return fire }
	c := corev1.Container{Image: "nicolaka/netshoot", Args: []string{"sleep", "3600"}}
	pod := reconcilePod("p", "u1", corev1.RestartPolicyAlways, c)
	pod.Spec.ServiceAccountName = "default"
	tk.apply(t, pod)
	token := filepath.Join(tk.rootDir, "pods", "u1", "kube-api-access-kfl", "token")
	requests := func() int {
		n := 0
		for _, a := range tk.cfg.Client.(*fake.Clientset).Actions() {
			if a.GetSubresource() == "token" {
				n++
			}
		}
		return n
	}
	if got, want := <-waits, time.Duration(float64(defaultTokenSeconds*time.Second)*tokenRefreshAt); got != want {
		t.Errorf("first renewal in %v, want %v (80%% of %d s)", got, want, defaultTokenSeconds)
	}
	if n := requests(); n != 1 {
		t.Fatalf("%d token requests before the renewal, want 1", n)
	}
	if err := os.WriteFile(token, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	tk.clock = tk.clock.Add(time.Duration(float64(defaultTokenSeconds*time.Second) * tokenRefreshAt))
	fire <- tk.clock
	<-waits // the renewal done, the next one is scheduled
	if n := requests(); n != 2 {
		t.Errorf("%d token requests after the renewal, want 2", n)
	}
	if b, err := os.ReadFile(token); err != nil || string(b) != "token-of-default/p" {
		t.Errorf("token file after renewal = %q, %v", b, err)
	}
}
