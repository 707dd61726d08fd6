package kubelet

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Node heartbeat settings, those of a real kubelet.
const (
	leaseNamespace       = corev1.NamespaceNodeLease
	leaseDurationSeconds = 40
)

// renewLease creates or renews the node's Lease in kube-node-lease, owned by
// the Node so that deleting the Node deletes it.
func (k *kubelet) renewLease(ctx context.Context) error {
	leases := k.cfg.Client.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(k.now())
	lease, err := leases.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := k.cfg.Client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("create lease of node %s: %w", k.cfg.NodeName, err)
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      k.cfg.NodeName,
				Namespace: leaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(k.cfg.NodeName),
				LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds),
				RenewTime:            &now,
			},
		}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create lease of node %s: %w", k.cfg.NodeName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease of node %s: %w", k.cfg.NodeName, err)
	}
	lease.Spec.HolderIdentity = ptr.To(k.cfg.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDurationSeconds)
	lease.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew lease of node %s: %w", k.cfg.NodeName, err)
	}
	return nil
}
