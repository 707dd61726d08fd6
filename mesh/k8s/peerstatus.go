package k8s

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// UpdatePeerStatus implements Backend. It starts from the informer's copy
// (or the API's when the cache has not seen the Peer yet), writes the whole
// status with the copy's resourceVersion and, on a conflict, starts again
// from a fresh read. Callers keep condition transition times with
// meta.SetStatusCondition and should rate-limit byte counters, since every
// change is a write.
func (c *Client) UpdatePeerStatus(ctx context.Context, name string, mutate func(*v1alpha1.Peer)) error {
	fresh := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.peer(ctx, name, fresh)
		fresh = true
		if err != nil {
			return err
		}
		p := cur.DeepCopy()
		mutate(p)
		if equality.Semantic.DeepEqual(cur.Status, p.Status) {
			return nil
		}
		return c.peerAPI.Put().Resource(v1alpha1.PeerPlural).Name(name).SubResource("status").
			Body(p).Do(ctx).Error()
	})
	if err != nil {
		return fmt.Errorf("update status of peer %q: %w", name, err)
	}
	return nil
}

// peer returns the cached Peer, or reads it when fresh or not cached.
func (c *Client) peer(ctx context.Context, name string, fresh bool) (*v1alpha1.Peer, error) {
	if !fresh {
		if obj, ok, _ := c.peers.GetStore().GetByKey(name); ok {
			return obj.(*v1alpha1.Peer), nil
		}
	}
	var p v1alpha1.Peer
	err := c.peerAPI.Get().Resource(v1alpha1.PeerPlural).Name(name).Do(ctx).Into(&p)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return &p, err
}
