package k8s

import (
	"errors"
	"testing"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/topology"
)

func TestFake(t *testing.T) {
	ctx := t.Context()
	f := NewFake()
	f.Set([]topology.Node{{Name: "a", Ready: true}, {Name: "b", Ready: true}}, []topology.Peer{{Name: "p"}}, nil)
	select {
	case <-f.Changes():
	default:
		t.Fatal("Set did not signal")
	}
	f.SetForwarding("b", false)
	select {
	case <-f.Changes():
	default:
		t.Error("SetForwarding did not signal")
	}
	nodes, peers, _ := f.Snapshot()
	if !nodes[0].Ready || nodes[1].Ready || len(peers) != 1 {
		t.Errorf("snapshot = %+v %+v, want a ready, b not", nodes, peers)
	}
	if err := f.PublishNode(ctx, "a", NodeAnnotations{Endpoint: "nope"}); !errors.Is(err, ErrInvalidAnnotation) {
		t.Errorf("PublishNode(bad endpoint) = %v", err)
	}
	if err := f.PublishNode(ctx, "a", NodeAnnotations{Endpoint: ":51820"}); err != nil || f.Published["a"].Endpoint != ":51820" {
		t.Errorf("PublishNode = %v, published %+v", err, f.Published)
	}
	_ = f.Heartbeat(ctx, "a")
	if f.Heartbeats["a"] != 1 {
		t.Errorf("heartbeats = %v", f.Heartbeats)
	}
	if err := f.UpdatePeerStatus(ctx, "p", func(p *v1alpha1.Peer) { p.Status.RxBytes = 7 }); err != nil || f.PeerStatus["p"].RxBytes != 7 {
		t.Errorf("UpdatePeerStatus = %v, status %+v", err, f.PeerStatus)
	}
	if err := f.UpdatePeerStatus(ctx, "q", func(*v1alpha1.Peer) {}); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdatePeerStatus(unknown) = %v", err)
	}
}
