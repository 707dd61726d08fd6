//go:build linux

package kubelet

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPrivilegedProbesDriveReadinessAndLiveness(t *testing.T) {
	h := startHarness(t, nil)
	fast := func(p corev1.ProbeHandler) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: p, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1}
	}
	// A built-in HTTP echo probed at /healthz, which a test request flips.
	web := hostPod("web", corev1.Container{Image: "kilofed/http-echo", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: fast(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}})})
	h.create(t, web)
	// Host programs probed over TCP: one listens on the probed port, one not.
	listen := []string{"TCP-LISTEN:42,reuseaddr,fork", "SYSTEM:echo hi"}
	h.create(t, hostPod("tcp-open", corev1.Container{Image: "alpine/socat", Args: listen,
		ReadinessProbe: fast(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(42)}})}))
	h.create(t, hostPod("tcp-closed", corev1.Container{Image: "alpine/socat", Args: listen,
		ReadinessProbe: fast(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(99)}})}))
	// An exec probe that passes once a file exists.
	flag := filepath.Join(t.TempDir(), "ready")
	h.create(t, hostPod("exec", corev1.Container{Image: "nicolaka/netshoot", Args: []string{"sleep", "3600"},
		ReadinessProbe: fast(corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", flag}}})}))
	// A liveness probe that always fails: the container is restarted.
	h.create(t, hostPod("dead", corev1.Container{Image: "nicolaka/netshoot", Args: []string{"sleep", "3600"},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}},
			PeriodSeconds: 1, FailureThreshold: 2}}))

	waitPodReady(t, h.client, h.ns, "web")
	waitPodReady(t, h.client, h.ns, "tcp-open")
	ready := func(name string) (bool, error) {
		p := h.pod(t, name)
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, fmt.Errorf("%s: phase %s, statuses %+v", name, p.Status.Phase, p.Status.ContainerStatuses)
		}
		cs := p.Status.ContainerStatuses[0].Ready
		if pr := conditionOf(p.Status, corev1.PodReady).Status == corev1.ConditionTrue; pr != cs {
			return false, fmt.Errorf("%s: pod Ready %v but container ready %v", name, pr, cs)
		}
		return cs, nil
	}
	wantReady := func(name string, want bool) {
		t.Helper()
		eventually(t, 20*time.Second, fmt.Sprintf("%s ready=%v", name, want), func() error {
			got, err := ready(name)
			if err == nil && got != want {
				err = fmt.Errorf("ready=%v", got)
			}
			return err
		})
	}
	webIP := h.pod(t, "web").Status.PodIP
	if _, err := workloadIn(h.nodeNs, "get", "http://"+webIP+":8080/healthz/fail"); err != nil {
		t.Fatal(err)
	}
	wantReady("web", false)
	if _, err := workloadIn(h.nodeNs, "get", "http://"+webIP+":8080/healthz/pass"); err != nil {
		t.Fatal(err)
	}
	wantReady("web", true)

	// The unready ones have been probed (and failed) for several periods.
	wantReady("exec", false)
	wantReady("tcp-closed", false)
	time.Sleep(3 * time.Second)
	for _, name := range []string{"exec", "tcp-closed"} {
		if got, err := ready(name); err != nil || got {
			t.Errorf("%s ready=%v (%v) after 3 failing periods, want running and not ready", name, got, err)
		}
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantReady("exec", true)

	eventually(t, 30*time.Second, "dead restarted by its liveness probe", func() error {
		p := h.pod(t, "dead")
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount < 1 {
			return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
		}
		return nil
	})
}
