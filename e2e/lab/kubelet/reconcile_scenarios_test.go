package kubelet

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var httpEcho = corev1.Container{Image: "kilofed/http-echo", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}

func TestReconcileStartsPod(t *testing.T) {
	tk := newTestKubelet(t)
	tk.apply(t, reconcilePod("web", "u1", corev1.RestartPolicyAlways, httpEcho))
	netns, veth := PodNetns("kfl-node-a", "default", "web"), hostVethName("default", "web")
	if diff := cmp.Diff([]string{"setup " + netns + " veth " + veth + " ips [10.42.0.2]"}, tk.net.take()); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
	readyFile := tk.runtime("default/web").containers[0].readyFile
	wantArgv := []string{"ip", "netns", "exec", netns, "/lab", "workload", "http", "--name", "web", "--namespace", "default",
		"--cluster", "paris", "--node", "node-a", "--port", "8080", "--ready-file", readyFile}
	if diff := cmp.Diff([][]string{wantArgv}, tk.procs.argv); diff != "" {
		t.Errorf("workload argv (-want +got):\n%s", diff)
	}
	want := "phase Running\npodIP 10.42.0.2 podIPs [{10.42.0.2}] hostIP 10.0.1.10 hostIPs [{10.0.1.10}]\n" +
		"container c ready=true restarts=0 running"
	if diff := cmp.Diff(want, tk.status(t, "default", "web")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestReconcileRestartPolicy(t *testing.T) {
	sleep1 := corev1.Container{Image: "alpine", Args: []string{"sleep", "1"}}
	tests := []struct {
		name         string
		policy       corev1.RestartPolicy
		exitCode     int32
		wantAfter    string // phase and container line after the exit
		wantTeardown bool
	}{
		{name: "Always restarts after success", policy: corev1.RestartPolicyAlways, exitCode: 0,
			wantAfter: "phase Running\ncontainer c ready=false restarts=0 waiting CrashLoopBackOff last=0"},
		{name: "Always restarts after failure", policy: corev1.RestartPolicyAlways, exitCode: 1,
			wantAfter: "phase Running\ncontainer c ready=false restarts=0 waiting CrashLoopBackOff last=1"},
		{name: "OnFailure restarts after failure", policy: corev1.RestartPolicyOnFailure, exitCode: 137,
			wantAfter: "phase Running\ncontainer c ready=false restarts=0 waiting CrashLoopBackOff last=137"},
		{name: "OnFailure ends after success", policy: corev1.RestartPolicyOnFailure, exitCode: 0,
			wantAfter: "phase Succeeded\ncontainer c ready=false restarts=0 terminated 0 Completed", wantTeardown: true},
		{name: "Never ends after success (seed's sleep 3600)", policy: corev1.RestartPolicyNever, exitCode: 0,
			wantAfter: "phase Succeeded\ncontainer c ready=false restarts=0 terminated 0 Completed", wantTeardown: true},
		{name: "Never ends after failure", policy: corev1.RestartPolicyNever, exitCode: 2,
			wantAfter: "phase Failed\ncontainer c ready=false restarts=0 terminated 2 Error", wantTeardown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := newTestKubelet(t)
			pod := reconcilePod("job", "u1", tt.policy, sleep1)
			tk.apply(t, pod)
			tk.net.take()
			tk.procs.exit(tt.exitCode, tk.clock)
			tk.sync(t, "default/job")
			if diff := cmp.Diff(tt.wantAfter, withoutIPs(tk.status(t, "default", "job"))); diff != "" {
				t.Errorf("status after exit (-want +got):\n%s", diff)
			}
			if !tt.wantTeardown {
				if got := tk.net.take(); len(got) != 0 {
					t.Errorf("network changed while restarting: %v", got)
				}
				// Not before the 1 s backoff...
				tk.clock = tk.clock.Add(500 * time.Millisecond)
				tk.sync(t, "default/job")
				if n := len(tk.procs.argv); n != 1 {
					t.Fatalf("restarted after 500ms (%d runs), want a 1s backoff", n)
				}
				// ...then restarted, and Ready once its ports are bound.
				tk.clock = tk.clock.Add(600 * time.Millisecond)
				tk.sync(t, "default/job")
				tk.sync(t, "default/job")
				want := "phase Running\ncontainer c ready=true restarts=1 running last=" + itoa(tt.exitCode)
				if diff := cmp.Diff(want, withoutIPs(tk.status(t, "default", "job"))); diff != "" {
					t.Errorf("status after restart (-want +got):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff([]string{"teardown " + PodNetns("kfl-node-a", "default", "job")}, tk.net.take()); diff != "" {
				t.Errorf("network after the end (-want +got):\n%s", diff)
			}
			if n := tk.allocs[0].InUse(); n != 0 {
				t.Errorf("%d addresses still allocated after the pod ended", n)
			}
			// The finished pod is not started again, even from a stale cache.
			tk.clock = tk.clock.Add(time.Minute)
			tk.apply(t, pod)
			if n := len(tk.procs.argv); n != 1 {
				t.Errorf("finished pod started again (%d runs)", n)
			}
		})
	}
}

func TestReconcileRemovesPod(t *testing.T) {
	tests := []struct {
		name       string
		remove     func(t *testing.T, tk *testKubelet, pod *corev1.Pod)
		wantAPIPod bool
	}{
		{name: "deletionTimestamp: torn down, then deleted with grace 0", remove: func(t *testing.T, tk *testKubelet, pod *corev1.Pod) {
			p := pod.DeepCopy()
			p.DeletionTimestamp = &metav1.Time{Time: tk.clock}
			tk.apply(t, p)
		}},
		{name: "gone from the cache (force delete)", remove: func(t *testing.T, tk *testKubelet, pod *corev1.Pod) {
			if err := tk.store.Delete(pod); err != nil {
				t.Fatal(err)
			}
			tk.sync(t, "default/web")
		}, wantAPIPod: true},
		{name: "bound to another node", remove: func(t *testing.T, tk *testKubelet, pod *corev1.Pod) {
			p := pod.DeepCopy()
			p.Spec.NodeName = "node-b"
			if err := tk.store.Update(p); err != nil {
				t.Fatal(err)
			}
			tk.sync(t, "default/web")
		}, wantAPIPod: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := newTestKubelet(t)
			pod := reconcilePod("web", "u1", corev1.RestartPolicyAlways, httpEcho)
			tk.apply(t, pod)
			tk.net.take()
			tt.remove(t, tk, pod)
			if diff := cmp.Diff([]string{"teardown " + PodNetns("kfl-node-a", "default", "web")}, tk.net.take()); diff != "" {
				t.Errorf("network (-want +got):\n%s", diff)
			}
			if tk.runtime("default/web") != nil || tk.allocs[0].InUse() != 0 {
				t.Errorf("runtime or address kept after removal")
			}
			_, err := tk.cfg.Client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
			if gotAPIPod := !apierrors.IsNotFound(err); gotAPIPod != tt.wantAPIPod {
				t.Errorf("API object present = %v, want %v (err %v)", gotAPIPod, tt.wantAPIPod, err)
			}
		})
	}
}

func TestReconcileReplacedPod(t *testing.T) {
	tk := newTestKubelet(t)
	tk.apply(t, reconcilePod("web", "u1", corev1.RestartPolicyAlways, httpEcho))
	tk.net.take()
	// Deleted and created again under the same name before we saw the delete.
	tk.apply(t, reconcilePod("web", "u2", corev1.RestartPolicyAlways, httpEcho))
	netns := PodNetns("kfl-node-a", "default", "web")
	want := []string{"teardown " + netns, "setup " + netns + " veth " + hostVethName("default", "web") + " ips [10.42.0.2]"}
	if diff := cmp.Diff(want, tk.net.take()); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
	if got := tk.runtime("default/web").uid; got != "u2" {
		t.Errorf("runtime uid = %s, want u2", got)
	}
}

func TestReconcileNetnsClaimedByOtherCluster(t *testing.T) {
	tk := newTestKubelet(t)
	name := PodNetns("kfl-node-a", "default", "web")
	if err := claimNetns(name, "cluster tokyo"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseNetns(name, "cluster tokyo") })
	pod := reconcilePod("web", "u1", corev1.RestartPolicyAlways, httpEcho)
	if _, err := tk.cfg.Client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tk.store.Add(pod); err != nil {
		t.Fatal(err)
	}
	err := tk.reconcile(context.Background(), "default/web")
	if !errors.Is(err, ErrNetnsInUse) {
		t.Fatalf("reconcile error = %v, want ErrNetnsInUse", err)
	}
	if got := tk.net.take(); len(got) != 0 || tk.allocs[0].InUse() != 0 {
		t.Errorf("conflicting pod touched the network %v or kept an address", got)
	}
	releaseNetns(name, "cluster tokyo")
	tk.sync(t, "default/web") // retried once the other pod is gone
	if tk.runtime("default/web") == nil {
		t.Error("pod not started after the conflict cleared")
	}
}

// withoutIPs drops the podIP line of a status text.
func withoutIPs(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "podIP") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func TestReconcileHostNetworkPod(t *testing.T) {
	tk := newTestKubelet(t)
	pod := reconcilePod("agent", "u1", corev1.RestartPolicyAlways, httpEcho)
	pod.Spec.HostNetwork = true
	tk.apply(t, pod)
	if got := tk.net.take(); len(got) != 0 {
		t.Errorf("hostNetwork pod touched the network: %v", got)
	}
	if got := tk.procs.argv[0][:4]; !cmp.Equal(got, []string{"ip", "netns", "exec", "kfl-node-a"}) {
		t.Errorf("hostNetwork workload runs in %v, want the node netns", got)
	}
	want := "phase Running\npodIP 10.0.1.10 podIPs [{10.0.1.10}] hostIP 10.0.1.10 hostIPs [{10.0.1.10}]\n" +
		"container c ready=true restarts=0 running"
	if diff := cmp.Diff(want, tk.status(t, "default", "agent")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	p := pod.DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: tk.clock}
	tk.apply(t, p)
	if got := tk.net.take(); len(got) != 0 || tk.allocs[0].InUse() != 0 {
		t.Errorf("hostNetwork pod deletion touched the network %v or the allocator", got)
	}
}
