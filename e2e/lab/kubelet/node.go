package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"runtime"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Versions and sizes that the Node reports.
const (
	kubeletVersion = "v1.37.2"
	kubeletPort    = 10250 // reported when Config.Serving is nil (nothing answers then)
	runtimeVersion = "kilofed-lab://v1"
)

// nodeCapacity is what every lab node reports as capacity and allocatable.
var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("4"),
	corev1.ResourceMemory:           resource.MustParse("8Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
	corev1.ResourceEphemeralStorage: resource.MustParse("50Gi"),
}

// nodeLabels returns the labels set at registration.
func nodeLabels(cfg Config) map[string]string {
	l := map[string]string{
		corev1.LabelHostname:   cfg.NodeName,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
	}
	for k, v := range cfg.Labels {
		l[k] = v
	}
	return l
}

// nodeAddresses returns status.addresses: InternalIP(s), ExternalIP,
// InternalDNS (the kubelet API's address, when served), Hostname.
func nodeAddresses(cfg Config) []corev1.NodeAddress {
	a := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: cfg.InternalIP.String()}}
	if cfg.InternalIP6.IsValid() {
		a = append(a, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: cfg.InternalIP6.String()})
	}
	if cfg.ExternalIP.IsValid() {
		a = append(a, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: cfg.ExternalIP.String()})
	}
	if api, _ := cfg.Serving.endpoint(); api.IsValid() {
		a = append(a, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: api.String()})
	}
	return append(a, corev1.NodeAddress{Type: corev1.NodeHostName, Address: cfg.NodeName})
}

// nodeSystemInfo returns status.nodeInfo; bootID changes with every Run.
func nodeSystemInfo(cfg Config, bootID, kernel string) corev1.NodeSystemInfo {
	sum := sha256.Sum256([]byte(cfg.Cluster + "/" + cfg.NodeName))
	id := hex.EncodeToString(sum[:16])
	return corev1.NodeSystemInfo{
		MachineID:               id,
		SystemUUID:              id,
		BootID:                  bootID,
		KernelVersion:           kernel,
		OSImage:                 "kilofed lab node",
		ContainerRuntimeVersion: runtimeVersion,
		KubeletVersion:          kubeletVersion,
		OperatingSystem:         "linux",
		Architecture:            runtime.GOARCH,
	}
}

// nodeStatus returns the status to post: prev with addresses, capacity,
// conditions (Ready=True, no pressure; transition times kept while the
// status stays the same), nodeInfo and daemonEndpoints replaced.
func nodeStatus(cfg Config, prev corev1.NodeStatus, info corev1.NodeSystemInfo, now metav1.Time) corev1.NodeStatus {
	st := *prev.DeepCopy()
	st.Addresses = nodeAddresses(cfg)
	st.Capacity = nodeCapacity.DeepCopy()
	st.Allocatable = nodeCapacity.DeepCopy()
	st.NodeInfo = info
	_, port := cfg.Serving.endpoint()
	st.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}}
	want := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kilofed lab kubelet stand-in is posting ready status"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
	}
	for i := range want {
		want[i].LastHeartbeatTime = now
		want[i].LastTransitionTime = now
		for _, old := range prev.Conditions {
			if old.Type == want[i].Type && old.Status == want[i].Status && !old.LastTransitionTime.IsZero() {
				want[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	// Keep conditions owned by others (e.g. NetworkUnavailable).
	for _, old := range prev.Conditions {
		if !slices.ContainsFunc(want, func(c corev1.NodeCondition) bool { return c.Type == old.Type }) {
			want = append(want, old)
		}
	}
	st.Conditions = want
	return st
}

// registerNode creates the Node or updates its labels, annotations and
// podCIDRs, then posts its status.
func (k *kubelet) registerNode(ctx context.Context) error {
	nodes := k.cfg.Client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName}}
			if err := applyNodeSpec(k.cfg, node); err != nil {
				return err
			}
			_, err = nodes.Create(ctx, node, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if err := applyNodeSpec(k.cfg, node); err != nil {
			return err
		}
		_, err = nodes.Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("register node %s: %w", k.cfg.NodeName, err)
	}
	return k.postNodeStatus(ctx)
}

// applyNodeSpec merges the configured labels, annotations and podCIDRs into node.
func applyNodeSpec(cfg Config, node *corev1.Node) error {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range nodeLabels(cfg) {
		node.Labels[k] = v
	}
	if len(cfg.Annotations) > 0 && node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range cfg.Annotations {
		node.Annotations[k] = v
	}
	if len(cfg.PodCIDRs) == 0 {
		return nil
	}
	want, _ := podCIDRsByFamily(cfg.PodCIDRs) // checked by validate
	var wantS []string
	for _, p := range want {
		wantS = append(wantS, p.String())
	}
	if len(node.Spec.PodCIDRs) > 0 && !slices.Equal(node.Spec.PodCIDRs, wantS) {
		return fmt.Errorf("%w: node %s already has podCIDRs %v and they cannot change to %v: delete the Node or fix PodCIDRs",
			ErrInvalidConfig, node.Name, node.Spec.PodCIDRs, wantS)
	}
	node.Spec.PodCIDR, node.Spec.PodCIDRs = wantS[0], wantS
	return nil
}

// postNodeStatus writes the node status with a fresh heartbeat.
func (k *kubelet) postNodeStatus(ctx context.Context) error {
	nodes := k.cfg.Client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status = nodeStatus(k.cfg, node.Status, k.nodeInfo, metav1.Now())
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("post status of node %s: %w", k.cfg.NodeName, err)
	}
	return nil
}

// nodePodCIDRs returns the node's podCIDRs from the API, IPv4 first, or none
// while kube-controller-manager has not allocated them.
func (k *kubelet) nodePodCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	node, err := k.cfg.Client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", k.cfg.NodeName, err)
	}
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("node %s has an invalid podCIDR %q: %w", k.cfg.NodeName, s, err)
		}
		out = append(out, p)
	}
	return podCIDRsByFamily(out)
}
