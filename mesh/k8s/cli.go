package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
)

// What the CLI (kgctl, kilofed) reads and writes beyond the Backend: the
// options the agents announce, so that it computes the mesh with the same
// options, and the Peers it creates for `connect --create`.

// PublishedGranularity returns the mesh granularity that node n's agent
// published in kilo.squat.ai/granularity, or "" when it published none.
// The value is returned as written, unchecked: topology.New rejects an
// unknown one.
func PublishedGranularity(n *corev1.Node) topology.Granularity {
	return topology.Granularity(strings.TrimSpace(n.Annotations[GranularityAnnotation]))
}

// Granularities returns the mesh granularity every node's agent published,
// by node name; nodes whose agent published none are left out.
func (c *Client) Granularities() map[string]topology.Granularity {
	out := make(map[string]topology.Granularity)
	for _, obj := range c.nodes.GetStore().List() {
		n := obj.(*corev1.Node)
		if g := PublishedGranularity(n); g != "" {
			out[n.Name] = g
		}
	}
	return out
}

// ErrAlreadyExists is returned by CreatePeer when a Peer of that name exists.
var ErrAlreadyExists = errors.New("already exists")

// CreatePeer creates the Peer p. The error matches ErrAlreadyExists when a
// Peer of that name exists, and carries the API server's validation message
// when it rejects the spec.
func (c *Client) CreatePeer(ctx context.Context, p *v1alpha1.Peer) error {
	var out v1alpha1.Peer
	err := c.peerAPI.Post().Resource(v1alpha1.PeerPlural).Body(p).Do(ctx).Into(&out)
	switch {
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create peer %q: %w: %w", p.Name, ErrAlreadyExists, err)
	case err != nil:
		return fmt.Errorf("create peer %q: %w", p.Name, err)
	}
	return nil
}
