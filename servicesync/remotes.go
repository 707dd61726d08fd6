package servicesync

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/mirror"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
	"github.com/kilofed/kilofed/servicesync/merge"
)

// remote is what servicesync knows of one joined cluster.
type remote struct {
	client client.Client
	key    string
	// exports are the ExportedServices last read; read once a full list
	// succeeded.
	exports []ssv1.ExportedServiceSpec
	read    bool
	// answering reports whether the last read succeeded; failingSince is
	// when reads started failing.
	answering    bool
	failingSince time.Time
	withdrawn    bool
}

// readRemote reads the ExportedServices of rc, keeping the last read when
// its API does not answer, and returns the exports to merge and whether
// they are known (read once, or withdrawn): an unknown remote's imports
// are not swept.
func (s *Syncer) readRemote(ctx context.Context, rc *fedv1.RemoteCluster, now time.Time) (exports []ssv1.ExportedServiceSpec, known bool) {
	id := rc.Spec.ClusterID
	r := s.remotes[id]
	if r == nil {
		r = &remote{}
		s.remotes[id] = r
	}
	err := s.list(ctx, rc, r)
	if err == nil {
		if !r.answering && r.read {
			s.log.Info("remote exports read again", "remote", id, "after", now.Sub(r.failingSince).Round(time.Second))
		}
		r.answering, r.read, r.withdrawn, r.failingSince = true, true, false, time.Time{}
		return r.exports, true
	}
	if r.answering || r.failingSince.IsZero() {
		r.failingSince = now
		s.log.Warn("remote exports not readable: keeping them while its tunnels handshake", "remote", id, "err", err, "bound", s.cfg.WithdrawAfter)
	}
	r.answering = false
	hs, herr := s.latestHandshake(ctx, id)
	if herr != nil {
		// Not even the local API answers: change nothing.
		return r.exports, r.read
	}
	if merge.Keep(false, hs, now, s.cfg.WithdrawAfter) {
		return r.exports, r.read
	}
	if !r.withdrawn {
		s.log.Warn("remote withdrawn: its API does not answer and its tunnels had no handshake within the bound",
			"remote", id, "since", r.failingSince.UTC().Format(time.RFC3339), "latestHandshake", hs, "bound", s.cfg.WithdrawAfter)
		r.withdrawn = true
	}
	return nil, true
}

// list reads every ExportedService of rc with the token of its Secret.
func (s *Syncer) list(ctx context.Context, rc *fedv1.RemoteCluster, r *remote) error {
	var sec corev1.Secret
	key := client.ObjectKey{Namespace: fedv1.Namespace, Name: rc.Spec.CredentialsSecret}
	if err := s.cfg.Local.Get(ctx, key, &sec); err != nil {
		return fmt.Errorf("read the credentials Secret %s: %w", key, err)
	}
	token := string(sec.Data["token"])
	if token == "" {
		return fmt.Errorf("the credentials Secret %s has no token: run kilofed join again", key)
	}
	k := rc.Spec.APIServer + "\x00" + string(rc.Spec.CABundle) + "\x00" + token
	if r.client == nil || r.key != k {
		cfg := &rest.Config{
			Host: rc.Spec.APIServer, BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{CAData: rc.Spec.CABundle},
			Timeout:         5 * time.Second, QPS: 20, Burst: 40,
			UserAgent: "kilofed-servicesync/" + s.cfg.ClusterID,
		}
		c, err := s.cfg.Dial(cfg)
		if err != nil {
			return err
		}
		r.client, r.key = c, k
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var list ssv1.ExportedServiceList
	if err := r.client.List(rctx, &list, client.InNamespace(ssv1.Namespace)); err != nil {
		return fmt.Errorf("list the ExportedServices of %s: %w", rc.Spec.ClusterID, err)
	}
	var exports []ssv1.ExportedServiceSpec
	for _, e := range list.Items {
		if e.Spec.ClusterID != rc.Spec.ClusterID {
			s.log.Warn("remote publishes an export of another cluster: refused", "remote", rc.Spec.ClusterID, "export", e.Name, "claims", e.Spec.ClusterID)
			continue
		}
		exports = append(exports, e.Spec)
	}
	r.exports = exports
	return nil
}

// latestHandshake returns the latest handshake of the local Peers mirrored
// from remote id's gateways, as the agents report it; nil when none.
func (s *Syncer) latestHandshake(ctx context.Context, id string) (*metav1.Time, error) {
	var peers kilov1.PeerList
	if err := s.cfg.Local.List(ctx, &peers, client.MatchingLabels{mirror.LabelRemote: id, mirror.LabelManagedBy: mirror.ManagedBy}); err != nil {
		return nil, err
	}
	var latest *metav1.Time
	for _, p := range peers.Items {
		if hs := p.Status.LatestHandshake; hs != nil && (latest == nil || hs.After(latest.Time)) {
			latest = hs.DeepCopy()
		}
	}
	return latest, nil
}
