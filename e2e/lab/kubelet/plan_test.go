package kubelet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestPlanFor(t *testing.T) {
	tcp := func(p int32) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolTCP}
	}
	udp := func(p int32) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolUDP}
	}
	tests := []struct {
		name string
		c    corev1.Container
		want workloadPlan
	}{
		{name: "seed alpine sleep 3600 (kubectl run args)", c: corev1.Container{Image: "alpine", Args: []string{"sleep", "3600"}},
			want: workloadPlan{Kind: kindSleep, Seconds: 3600}},
		{name: "sleep as command", c: corev1.Container{Image: "busybox:1.36", Command: []string{"/bin/sleep", "30"}},
			want: workloadPlan{Kind: kindSleep, Seconds: 30}},
		{name: "sleep infinity", c: corev1.Container{Image: "busybox", Command: []string{"sleep", "infinity"}},
			want: workloadPlan{Kind: kindSleep}},
		{name: "sleep with unit", c: corev1.Container{Image: "alpine", Args: []string{"sleep", "2m"}},
			want: workloadPlan{Kind: kindSleep, Seconds: 120}},
		{name: "sleep in shell", c: corev1.Container{Image: "alpine", Command: []string{"sh", "-c", "sleep 10"}},
			want: workloadPlan{Kind: kindSleep, Seconds: 10}},
		{name: "sub-second sleep rounds up", c: corev1.Container{Image: "alpine", Args: []string{"sleep", "0.2"}},
			want: workloadPlan{Kind: kindSleep, Seconds: 1}},
		{name: "alpine without command", c: corev1.Container{Image: "alpine"},
			want: workloadPlan{Kind: kindSleep}},
		{name: "unknown command without ports", c: corev1.Container{Image: "registry.internal/patient-data:v2.1.0", Command: []string{"/app"}},
			want: workloadPlan{Kind: kindSleep}},
		{name: "http-echo default port", c: corev1.Container{Image: "kilofed/http-echo"},
			want: workloadPlan{Kind: kindHTTP, Ports: []int32{8080}}},
		{name: "echoserver with port", c: corev1.Container{Image: "registry.k8s.io/echoserver:2.5", Ports: []corev1.ContainerPort{tcp(9000)}},
			want: workloadPlan{Kind: kindHTTP, Ports: []int32{9000}}},
		{name: "GPU ml-inference on 8080", c: corev1.Container{Image: "gpu.example/ml-inference:1.0", Ports: []corev1.ContainerPort{tcp(8080)}},
			want: workloadPlan{Kind: kindHTTP, Ports: []int32{8080}}},
		{name: "protocol left empty means TCP", c: corev1.Container{Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}}},
			want: workloadPlan{Kind: kindHTTP, Ports: []int32{80}}},
		{name: "tcp ports only, udp ignored", c: corev1.Container{Image: "coredns", Ports: []corev1.ContainerPort{udp(53), tcp(53), tcp(9153)}},
			want: workloadPlan{Kind: kindHTTP, Ports: []int32{53, 9153}}},
		{name: "udp only image without echo sleeps", c: corev1.Container{Image: "statsd", Ports: []corev1.ContainerPort{udp(8125)}},
			want: workloadPlan{Kind: kindSleep}},
		{name: "ports with a server command", c: corev1.Container{Image: "python:3", Command: []string{"python", "serve.py"}, Ports: []corev1.ContainerPort{tcp(5000)}},
			want: workloadPlan{Kind: kindHTTP, Ports: []int32{5000}}},
		{name: "udp-echo default port", c: corev1.Container{Image: "kilofed/udp-echo:latest"},
			want: workloadPlan{Kind: kindUDP, Ports: []int32{9090}}},
		{name: "udp-echo takes every port, protocol forgotten", c: corev1.Container{Image: "kilofed/UDP-ECHO", Ports: []corev1.ContainerPort{{ContainerPort: 5353}, udp(7000)}},
			want: workloadPlan{Kind: kindUDP, Ports: []int32{5353, 7000}}},
		{name: "sleep command beats echo image", c: corev1.Container{Image: "http-echo", Args: []string{"sleep", "5"}},
			want: workloadPlan{Kind: kindSleep, Seconds: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, planFor(tt.c)); diff != "" {
				t.Errorf("planFor (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanArgs(t *testing.T) {
	id := podIdentity{Pod: "web-1", Namespace: "default", Cluster: "paris", Node: "node-a"}
	tests := []struct {
		name  string
		plan  workloadPlan
		ready string
		want  []string
	}{
		{name: "http", plan: workloadPlan{Kind: kindHTTP, Ports: []int32{8080, 8081}}, ready: "/tmp/r",
			want: []string{"http", "--name", "web-1", "--namespace", "default", "--cluster", "paris", "--node", "node-a",
				"--port", "8080", "--port", "8081", "--ready-file", "/tmp/r"}},
		{name: "udp", plan: workloadPlan{Kind: kindUDP, Ports: []int32{9090}},
			want: []string{"udp", "--port", "9090"}},
		{name: "sleep", plan: workloadPlan{Kind: kindSleep, Seconds: 3600}, ready: "/r",
			want: []string{"sleep", "--seconds", "3600", "--ready-file", "/r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.plan.args(id, tt.ready)); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}
