package k8s

import (
	"context"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// heartbeat is this process's state of one node's heartbeat Lease.
type heartbeat struct {
	// lease is the Lease as last written; nil when it must be read first.
	lease *coordinationv1.Lease
	// anew says that the next write starts the Lease again as new.
	anew bool
	// returned is when the last Heartbeat call returned (this process's
	// clock), zero before the first.
	returned time.Time
}

// Heartbeat implements Backend: it sets the Lease's renewTime to now, with
// the node as holder, the lease duration in seconds (rounded up) and the
// Node as owner, so that the garbage collector deletes the Lease with its
// Node. A Lease started anew is deleted and created again: its
// creationTimestamp, set by the API server's clock, orders the nodes that
// are otherwise equal candidates for leadership (Snapshot's Node.Since).
func (c *Client) Heartbeat(ctx context.Context, name string) error {
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	hb := c.hb[name]
	now := c.now()
	switch {
	case hb == nil:
		hb = &heartbeat{anew: true}
		c.hb[name] = hb
	case !hb.anew && now.Sub(hb.returned) >= c.cfg.LeaseDuration:
		c.cfg.Logger.Info("no heartbeat for a lease duration: the lease starts again as new, so this node ranks after the nodes that kept working",
			"node", name, "gap", now.Sub(hb.returned).Round(time.Millisecond), "lease_duration", c.cfg.LeaseDuration)
		hb.anew = true
	}
	defer func() { hb.returned = c.now() }()
	out, err := c.writeLease(ctx, name, hb)
	if err != nil {
		hb.lease = nil
		return fmt.Errorf("renew lease %s/%s: %w", c.cfg.LeaseNamespace, LeaseName(name), err)
	}
	hb.lease, hb.anew = out, false
	return nil
}

// writeLease renews node's Lease, or creates it again when hb says so.
func (c *Client) writeLease(ctx context.Context, node string, hb *heartbeat) (*coordinationv1.Lease, error) {
	api := c.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace)
	if hb.anew {
		err := api.Delete(ctx, LeaseName(node), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		return c.createLease(ctx, node)
	}
	if hb.lease != nil {
		out, err := api.Update(ctx, c.renewed(hb.lease, node), metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil || !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return out, err
		}
	}
	l, err := api.Get(ctx, LeaseName(node), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return c.createLease(ctx, node)
	}
	if err != nil {
		return nil, err
	}
	return api.Update(ctx, c.renewed(l, node), metav1.UpdateOptions{FieldManager: FieldManager})
}

// createLease creates node's Lease, owned by its Node.
func (c *Client) createLease(ctx context.Context, node string) (*coordinationv1.Lease, error) {
	owner, err := c.nodeOwner(ctx, node)
	if err != nil {
		return nil, err
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: LeaseName(node), Namespace: c.cfg.LeaseNamespace, OwnerReferences: []metav1.OwnerReference{owner},
	}}
	out, err := c.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).Create(ctx, c.renewed(l, node), metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w (is namespace %s missing? it comes with mesh/config/rbac/agent.yaml)", err, c.cfg.LeaseNamespace)
	}
	return out, err
}

// nodeOwner returns the owner reference to the Node named node, read from
// the cache or else from the API server.
func (c *Client) nodeOwner(ctx context.Context, node string) (metav1.OwnerReference, error) {
	var n *corev1.Node
	if obj, ok, _ := c.nodes.GetStore().GetByKey(node); ok {
		n = obj.(*corev1.Node)
	} else {
		got, err := c.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return metav1.OwnerReference{}, fmt.Errorf("node %q, the owner of its lease: %w: %w", node, ErrNotFound, err)
		}
		if err != nil {
			return metav1.OwnerReference{}, fmt.Errorf("node %q, the owner of its lease: %w", node, err)
		}
		n = got
	}
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}, nil
}

// renewed returns a copy of l renewed now by node.
func (c *Client) renewed(l *coordinationv1.Lease, node string) *coordinationv1.Lease {
	l = l.DeepCopy()
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LeaseLabel] = "true"
	now := metav1.NewMicroTime(time.Now())
	secs := int32(math.Ceil(c.cfg.LeaseDuration.Seconds()))
	l.Spec.HolderIdentity = &node
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &now
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &now
	}
	return l
}

// ReleaseHeartbeat implements Backend.
func (c *Client) ReleaseHeartbeat(ctx context.Context, name string) error {
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	delete(c.hb, name)
	err := c.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).Delete(ctx, LeaseName(name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release lease %s/%s: %w", c.cfg.LeaseNamespace, LeaseName(name), err)
	}
	return nil
}
