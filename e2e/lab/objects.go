package lab

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Images that the kubelet stand-in maps to built-in workloads (by name: an
// image containing "udp-echo" is the UDP echo, one containing "echo" the
// HTTP echo, anything else sleeps).
const (
	// EchoImage runs the HTTP echo server, which answers every path with
	// "<pod> <cluster> <node>".
	EchoImage = "kilofed/echo:lab"
	// UDPEchoImage runs the UDP echo server.
	UDPEchoImage = "kilofed/udp-echo:lab"
	// SleepImage runs nothing but holds the pod (a client pod).
	SleepImage = "alpine:3"
)

// EchoPort is the HTTP echo's container port in the objects below.
const EchoPort = 8080

// AppLabel is the label the objects below select their pods by.
const AppLabel = "app"

// EchoPod returns an HTTP echo Pod bound to node (empty: left to the
// scheduler), labeled app=<app>.
func EchoPod(namespace, name, app, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{AppLabel: app}},
		Spec:       echoPodSpec(node),
	}
}

// SleepPod returns a Pod that only holds its network namespace, bound to
// node: the client of a test.
func SleepPod(namespace, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{AppLabel: name}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "sleep", Image: SleepImage, Command: []string{"sleep", "infinity"}}},
		},
	}
}

// EchoDeployment returns a Deployment of HTTP echo pods labeled
// app=<name>, all bound to node (empty: the scheduler places them).
func EchoDeployment(namespace, name, node string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{AppLabel: name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       echoPodSpec(node),
			},
		},
	}
}

// EchoService returns a ClusterIP Service selecting app=<app> on port
// (TCP) towards the echo's port.
func EchoService(namespace, name, app string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{AppLabel: app},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(EchoPort),
			}},
		},
	}
}

func echoPodSpec(node string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeName: node,
		Containers: []corev1.Container{{
			Name:  "echo",
			Image: EchoImage,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: EchoPort, Protocol: corev1.ProtocolTCP}},
		}},
	}
}
