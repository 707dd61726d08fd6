package k8s

import (
	"context"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Heartbeat implements Backend: it sets the Lease's renewTime to now, with
// the node as holder and the lease duration in seconds (rounded up).
func (c *Client) Heartbeat(ctx context.Context, name string) error {
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	api := c.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace)
	if l := c.hb[name]; l != nil {
		out, err := api.Update(ctx, c.renewed(l, name), metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			c.hb[name] = out
			return nil
		}
		delete(c.hb, name)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("renew lease %s/%s: %w", c.cfg.LeaseNamespace, LeaseName(name), err)
		}
	}
	l, err := api.Get(ctx, LeaseName(name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName(name), Namespace: c.cfg.LeaseNamespace}}
		l, err = api.Create(ctx, c.renewed(c.acquire(l, name), name), metav1.CreateOptions{FieldManager: FieldManager})
	case err == nil:
		l, err = api.Update(ctx, c.renewed(c.acquire(l, name), name), metav1.UpdateOptions{FieldManager: FieldManager})
	}
	if err != nil {
		return fmt.Errorf("renew lease %s/%s: %w", c.cfg.LeaseNamespace, LeaseName(name), err)
	}
	c.hb[name] = l
	c.acquired[name] = true
	return nil
}

// acquire sets l's acquire time to now the first time this process
// heartbeats for node: the agent's run starts then (a lease left by a
// crashed run keeps its old time otherwise, and the restarted node would
// take the lead back from the one that replaced it). Leader election prefers
// the earliest acquire time (topology.Node.Since).
func (c *Client) acquire(l *coordinationv1.Lease, node string) *coordinationv1.Lease {
	if c.acquired[node] && l.Spec.AcquireTime != nil {
		return l
	}
	l = l.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	l.Spec.AcquireTime = &now
	return l
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
	return l
}

// RunHeartbeat implements Backend.
func (c *Client) RunHeartbeat(ctx context.Context, name string, every time.Duration) error {
	if every <= 0 {
		every = c.cfg.LeaseDuration / 3
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := c.Heartbeat(ctx, name); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("heartbeat failed; other nodes stop counting on this one after the lease duration",
				"node", name, "lease_duration", c.cfg.LeaseDuration, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// ReleaseHeartbeat implements Backend.
func (c *Client) ReleaseHeartbeat(ctx context.Context, name string) error {
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	delete(c.hb, name)
	delete(c.acquired, name)
	err := c.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).Delete(ctx, LeaseName(name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release lease %s/%s: %w", c.cfg.LeaseNamespace, LeaseName(name), err)
	}
	return nil
}
