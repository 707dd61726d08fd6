//go:build linux

package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/e2e/lab/kubelet"
)

// Kubectl runs the real kubectl (from the lab bins) against the cluster
// with the admin kubeconfig and returns its standard output; on failure
// the error holds its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(c.lab.bins, "kubectl"), "--kubeconfig=" + c.Kubeconfig}, args...)
	return execIn(ctx, "", argv...)
}

// PodNamespace returns the network namespace of a pod that the kubelet
// stand-in runs on one of the cluster's nodes, or an error wrapping
// ErrNotFound when the pod does not exist, has no node of this lab, or is
// not started yet.
func (c *Cluster) PodNamespace(ctx context.Context, namespace, pod string) (*Namespace, error) {
	p, err := c.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s in cluster %s: %w: %w", namespace, pod, c.Name, ErrNotFound, err)
	}
	if c.Node(p.Spec.NodeName) == nil {
		return nil, fmt.Errorf("pod %s/%s in cluster %s runs on no lab node (spec.nodeName %q): %w",
			namespace, pod, c.Name, p.Spec.NodeName, ErrNotFound)
	}
	if p.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s/%s in cluster %s has no IP yet (phase %s): %w", namespace, pod, c.Name, p.Status.Phase, ErrNotFound)
	}
	return &Namespace{Name: kubelet.PodNetns(c.Node(p.Spec.NodeName).Netns, namespace, pod), lab: c.lab}, nil
}

// PodExec runs argv in the network namespace of pod namespace/pod of the
// named cluster and returns its standard output (the lab's `kubectl exec`:
// the command runs on the machine, in the pod's network only).
func (l *Lab) PodExec(ctx context.Context, cluster, namespace, pod string, argv ...string) ([]byte, error) {
	c := l.Cluster(cluster)
	if c == nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, ErrNotFound)
	}
	ns, err := c.PodNamespace(ctx, namespace, pod)
	if err != nil {
		return nil, err
	}
	return ns.Exec(ctx, argv...)
}

// PodGet makes an HTTP GET of url from the pod's network namespace (with
// the kilofed-lab workload client) and returns the body, trimmed.
func (l *Lab) PodGet(ctx context.Context, cluster, namespace, pod, url string) (string, error) {
	out, err := l.PodExec(ctx, cluster, namespace, pod, l.labBin, "workload", "get", url)
	return strings.TrimSpace(string(out)), err
}

// Get makes an HTTP GET of url from the namespace (with the kilofed-lab
// workload client) and returns the body, trimmed.
func (ns *Namespace) Get(ctx context.Context, url string) (string, error) {
	out, err := ns.Exec(ctx, ns.lab.labBin, "workload", "get", url)
	return strings.TrimSpace(string(out)), err
}
