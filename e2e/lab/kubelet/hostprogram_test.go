package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestReconcileRunsHostProgramImages(t *testing.T) {
	binDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(binDir, "kg"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		c        corev1.Container
		host     bool
		wantArgv []string // after the netns prefix
		wantEnv  []string // in the environment, besides PATH, HOSTNAME and HOME
		wantDir  string
	}{
		{name: "conformance socat", c: corev1.Container{Image: "alpine/socat:1.7.4.4", Command: []string{"/bin/sh"},
			Args: []string{"-c", "socat TCP-LISTEN:42,crlf,reuseaddr,fork SYSTEM:'echo hi'"},
			Env:  []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}},
			wantArgv: []string{"/bin/sh", "-c", "socat TCP-LISTEN:42,crlf,reuseaddr,fork SYSTEM:'echo hi'"},
			wantEnv:  []string{"GREETING=hello"}, wantDir: "/"},
		{name: "socat entrypoint with args", c: corev1.Container{Image: "alpine/socat", Args: []string{"-V"}},
			wantArgv: []string{"socat", "-V"}, wantDir: "/"},
		{name: "conformance netshoot", c: corev1.Container{Image: "nicolaka/netshoot:v0.15", WorkingDir: "/tmp",
			Args: []string{"/bin/sh", "-ec", "while :; do echo '.'; sleep 5 ; done"}},
			wantArgv: []string{"/bin/sh", "-ec", "while :; do echo '.'; sleep 5 ; done"}, wantDir: "/tmp"},
		{name: "kg image runs ImageBinDir/kg", c: corev1.Container{Image: "ghcr.io/kilofed/kg:v0.1",
			Args: []string{"--hostname=$(NODE_NAME)"}, Env: []corev1.EnvVar{{Name: "NODE_NAME", Value: "node-a"}}},
			wantArgv: []string{filepath.Join(binDir, "kg"), "--hostname=node-a"}, wantEnv: []string{"NODE_NAME=node-a"}, wantDir: "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := newTestKubelet(t)
			tk.cfg.ImageBinDir = binDir
			pod := reconcilePod("p", "u1", corev1.RestartPolicyAlways, tt.c)
			pod.Spec.AutomountServiceAccountToken = ptr.To(false) // no mounts: TestReconcileMountsVolumes
			tk.apply(t, pod)
			netns := PodNetns("kfl-node-a", "default", "p")
			want := append([]string{"ip", "netns", "exec", netns}, tt.wantArgv...)
			if diff := cmp.Diff([][]string{want}, tk.procs.argv); diff != "" {
				t.Fatalf("argv (-want +got):\n%s", diff)
			}
			wantEnv := append([]string{"PATH=" + execPath, "HOSTNAME=p", "HOME=/root"}, tt.wantEnv...)
			if diff := cmp.Diff(wantEnv, tk.procs.env[0]); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if tk.procs.dir[0] != tt.wantDir {
				t.Errorf("working dir %q, want %q", tk.procs.dir[0], tt.wantDir)
			}
			// No readiness probe: Ready as soon as it runs.
			if got := tk.status(t, "default", "p"); !strings.Contains(got, "container c ready=true restarts=0 running") {
				t.Errorf("status:\n%s\nwant the container running and ready", got)
			}
		})
	}
}

func TestReconcileHostProgramNotFoundFailsTheRun(t *testing.T) {
	tk := newTestKubelet(t)
	tk.apply(t, reconcilePod("p", "u1", corev1.RestartPolicyNever,
		corev1.Container{Image: "nicolaka/netshoot", Command: []string{"/no/such/program"}}))
	if len(tk.procs.argv) != 0 {
		t.Fatalf("started %v, want nothing started", tk.procs.argv)
	}
	tk.sync(t, "default/p")
	if got, want := withoutIPs(tk.status(t, "default", "p")), "phase Failed\ncontainer c ready=false restarts=0 terminated 127 Error"; got != want {
		t.Errorf("status:\n%s\nwant:\n%s", got, want)
	}
	logs, _ := os.ReadFile(tk.logPath("default", "p", "c"))
	if !strings.Contains(string(logs), `"/no/such/program": no such executable file`) {
		t.Errorf("container log %q does not say why", logs)
	}
}

func TestReconcileKeepsBuiltInWorkloadsForOtherImages(t *testing.T) {
	tk := newTestKubelet(t)
	tk.cfg.ImageBinDir = t.TempDir()
	tk.apply(t, reconcilePod("p", "u1", corev1.RestartPolicyAlways, corev1.Container{Image: "alpine", Args: []string{"sleep", "3600"}}))
	if got := tk.procs.argv[0][4:7]; !cmp.Equal(got, []string{"/lab", "workload", "sleep"}) {
		t.Errorf("alpine sleep 3600 runs %v, want the built-in sleep", tk.procs.argv[0])
	}
}
