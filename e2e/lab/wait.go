package lab

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pollInterval is how often the waits below look again.
const pollInterval = 250 * time.Millisecond

// WaitPods waits until at least n pods of namespace matching the label
// selector are Running and Ready with an IP, and returns them. ctx bounds
// the wait.
func (c *Cluster) WaitPods(ctx context.Context, namespace, selector string, n int) ([]corev1.Pod, error) {
	var last string
	for {
		list, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			var ready []corev1.Pod
			for _, p := range list.Items {
				if podReady(&p) {
					ready = append(ready, p)
				}
			}
			if len(ready) >= n {
				return ready, nil
			}
			last = fmt.Sprintf("%d of %d pods ready", len(ready), n)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster %s: pods %q in %s not ready: %s: %w", c.Name, selector, namespace, last, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// podReady reports whether a pod is Running and Ready with an IP.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitEndpointSlices waits until the EndpointSlices of a Service (built by
// kube-controller-manager) hold at least n ready endpoints, and returns
// them.
func (c *Cluster) WaitEndpointSlices(ctx context.Context, namespace, service string, n int) ([]discoveryv1.EndpointSlice, error) {
	var last string
	for {
		list, err := c.client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + service,
		})
		if err == nil {
			ready := 0
			for _, s := range list.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready == nil || *e.Conditions.Ready {
						ready++
					}
				}
			}
			if ready >= n {
				return list.Items, nil
			}
			last = fmt.Sprintf("%d of %d endpoints ready in %d slices", ready, n, len(list.Items))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster %s: service %s/%s: %s: %w", c.Name, namespace, service, last, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}
