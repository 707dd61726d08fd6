package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/k8s"
	"github.com/kilofed/kilofed/mesh/topology"
	"github.com/kilofed/kilofed/mesh/wireguard"
)

// readyHandshake is how recent a handshake must be for a Peer to be Ready:
// WireGuard renews sessions every 2 minutes while traffic flows.
const readyHandshake = 3 * time.Minute

// statusRefresh bounds how often unchanged byte counters are written.
const statusRefresh = 30 * time.Second

// PeerStatus is the status an agent reports for one Peer, before it is
// written: the pure part of status reporting.
type PeerStatus struct {
	// Accepted, Reason and Message make the Accepted condition.
	Accepted        bool
	Reason, Message string
	// Live is the WireGuard state of the peer on this node, if configured.
	Live *wireguard.PeerState
}

// PeerStatuses decides the status of every Peer the cluster holds: accepted
// peers of topo (with their live state from st), peers topo excluded, and
// Peer objects that could not be read (bad).
func PeerStatuses(topo *topology.Topology, bad []k8s.Problem, st wireguard.State) map[string]PeerStatus {
	out := map[string]PeerStatus{}
	for _, p := range topo.Peers {
		s := PeerStatus{Accepted: true, Reason: v1alpha1.ReasonValid, Message: "configured on the mesh's gateways"}
		if live, ok := st.Peer(p.PublicKey); ok {
			s.Live = &live
		}
		out[p.Name] = s
	}
	for _, pr := range topo.Problems {
		if pr.Kind != topology.KindPeer || pr.Severity != topology.Excluded {
			continue
		}
		reason := v1alpha1.ReasonInvalidSpec
		if pr.Code == topology.CodeOverlap || pr.Code == topology.CodeSubnetOverlap {
			reason = v1alpha1.ReasonOverlap
		}
		out[pr.Name] = PeerStatus{Reason: reason, Message: pr.Reason}
	}
	for _, pr := range bad {
		if pr.Kind == topology.KindPeer {
			out[pr.Name] = PeerStatus{Reason: v1alpha1.ReasonInvalidSpec, Message: pr.Err.Error()}
		}
	}
	return out
}

// apply writes s into p's status, keeping condition transition times.
func (s PeerStatus) apply(p *v1alpha1.Peer, node string, now time.Time) {
	accepted := metav1.ConditionFalse
	if s.Accepted {
		accepted = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionAccepted, Status: accepted, Reason: s.Reason, Message: s.Message,
		ObservedGeneration: p.Generation,
	})
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonNoHandshake, Message: "no handshake in the last 3 minutes", ObservedGeneration: p.Generation}
	p.Status.ObservedGeneration = p.Generation
	p.Status.Node = node
	p.Status.LatestHandshake, p.Status.Endpoint, p.Status.RxBytes, p.Status.TxBytes = nil, "", 0, 0
	if l := s.Live; l != nil {
		if !l.LastHandshake.IsZero() {
			t := metav1.NewTime(l.LastHandshake)
			p.Status.LatestHandshake = &t
			if now.Sub(l.LastHandshake) < readyHandshake {
				ready.Status, ready.Reason = metav1.ConditionTrue, v1alpha1.ReasonHandshake
				ready.Message = fmt.Sprintf("handshake with %s at %s", node, l.LastHandshake.UTC().Format(time.RFC3339))
			}
		}
		if l.Endpoint.IsValid() {
			p.Status.Endpoint = l.Endpoint.String()
		}
		p.Status.RxBytes, p.Status.TxBytes = l.ReceiveBytes, l.TransmitBytes
	}
	if !s.Accepted {
		ready.Message = "not accepted: " + s.Message
	}
	meta.SetStatusCondition(&p.Status.Conditions, ready)
}

// summary is what, when it changes, makes a status worth writing at once.
func (s PeerStatus) summary(now time.Time) string {
	hs := ""
	if s.Live != nil {
		hs = fmt.Sprint(s.Live.LastHandshake.Unix(), s.Live.Endpoint, now.Sub(s.Live.LastHandshake) < readyHandshake)
	}
	return fmt.Sprint(s.Accepted, s.Reason, s.Message, hs)
}

// reportPeers writes the Peers' status when this node leads the gateway
// segment, the one node every agent agrees on. Unchanged statuses are
// written at most every statusRefresh, for the byte counters.
func (a *Agent) reportPeers(ctx context.Context, topo *topology.Topology, bad []k8s.Problem) error {
	gw, ok := topo.Gateway()
	if !ok || gw.LeaderNode().Name != a.cfg.Hostname {
		return nil
	}
	st, err := a.cfg.Device.Show(ctx)
	if err != nil {
		return fmt.Errorf("read WireGuard state: %w", err)
	}
	now := a.now()
	var errs []error
	for name, s := range PeerStatuses(topo, bad, st) {
		sum := s.summary(now)
		last := a.peerWrites[name]
		if last.summary == sum && now.Sub(last.at) < statusRefresh {
			continue
		}
		err := a.cfg.Backend.UpdatePeerStatus(ctx, name, func(p *v1alpha1.Peer) { s.apply(p, a.cfg.Hostname, now) })
		if err != nil && !errors.Is(err, k8s.ErrNotFound) {
			errs = append(errs, fmt.Errorf("status of Peer %s: %w", name, err))
			continue
		}
		a.peerWrites[name] = statusWrite{summary: sum, at: now}
	}
	return errors.Join(errs...)
}

type statusWrite struct {
	summary string
	at      time.Time
}
