//go:build linux

package lab

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControlPlaneStopsAndStartsAgainWithItsState stops and restarts the
// API server alone, then the whole control plane, and checks each time
// that the API is really gone while stopped, and that it comes back on the
// same address with the same data (etcd), certificates (the old clients
// work) and a working controller manager (a new node-bound pod runs).
func TestControlPlaneStopsAndStartsAgainWithItsState(t *testing.T) {
	l := StartT(t, Spec{Clusters: []ClusterSpec{{Name: "cp", Locations: []LocationSpec{{Nodes: []NodeSpec{{Name: "cp-1"}}}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := l.Cluster("cp")
	cms := c.Client().CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := c.APIServerProcess()

	for _, o := range []struct {
		name        string
		stop        func() error
		start       func(context.Context) error
		wrongState  func() error // stopping again is refused
		etcdStopped bool
	}{
		{"api-server", c.StopAPIServer, c.StartAPIServer, c.StopAPIServer, false},
		{"control-plane", c.StopControlPlane, c.StartControlPlane, c.StopAPIServer, true},
	} {
		t.Run(o.name, func(t *testing.T) {
			before := c.APIServerProcess()
			if err := o.stop(); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if !before.Exited() || groupAlive(before.Pid()) {
				t.Fatalf("kube-apiserver (pid %d) still runs after the stop", before.Pid())
			}
			if listening(netip.AddrPortFrom(c.APIServerIP, APIServerPort)) {
				t.Fatalf("something still listens on %s:%d", c.APIServerIP, APIServerPort)
			}
			etcd, _ := hostPort(c.etcdURL)
			if got := listening(etcd); got == o.etcdStopped {
				t.Errorf("etcd listening = %v after stopping the %s", got, o.name)
			}
			short, done := context.WithTimeout(ctx, 3*time.Second)
			_, err := cms.Get(short, "kept", metav1.GetOptions{})
			done()
			if err == nil {
				t.Fatal("the API answered while stopped")
			}
			if err := o.wrongState(); !errors.Is(err, ErrControlPlaneState) {
				t.Errorf("stopping a stopped API server: %v, want ErrControlPlaneState", err)
			}

			began := time.Now()
			if err := o.start(ctx); err != nil {
				t.Fatalf("start: %v", err)
			}
			t.Logf("%s ready again %v after its start", o.name, time.Since(began).Round(time.Millisecond))
			if err := c.StartAPIServer(ctx); !errors.Is(err, ErrControlPlaneState) {
				t.Errorf("starting a running API server: %v, want ErrControlPlaneState", err)
			}
			if now := c.APIServerProcess(); now == before || now.Pid() == before.Pid() {
				t.Errorf("the API server process was not replaced (pid %d)", now.Pid())
			}
			cm, err := cms.Get(ctx, "kept", metav1.GetOptions{})
			if err != nil || cm.Data["k"] != "v" {
				t.Fatalf("after the restart, ConfigMap kept: %v, %v", cm, err)
			}
			pod := EchoPod("default", "echo-"+o.name, "echo-"+o.name, "cp-1")
			if _, err := c.Client().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.WaitPods(ctx, "default", "app=echo-"+o.name, 1); err != nil {
				t.Fatalf("a pod created after the restart: %v", err)
			}
		})
	}
	if first.Exited() != true {
		t.Errorf("the first API server still runs")
	}

	t.Run("freeze", func(t *testing.T) {
		if err := c.FreezeAPIServer(); err != nil {
			t.Fatal(err)
		}
		short, done := context.WithTimeout(ctx, 2*time.Second)
		_, err := cms.Get(short, "kept", metav1.GetOptions{})
		done()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a request to the frozen API server: %v, want it to hang until its deadline", err)
		}
		if err := c.ThawAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Get(ctx, "kept", metav1.GetOptions{}); err != nil {
			t.Errorf("after the thaw: %v", err)
		}
	})
}
