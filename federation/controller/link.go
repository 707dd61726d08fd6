package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/join"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/federation/mirror"
	"github.com/kilofed/kilofed/federation/ranges"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// TunnelFresh is how recent a handshake must be for a tunnel to count as
// up: WireGuard renews a session every 2 minutes while it is used, and the
// mirrored Peers' keepalive keeps it used.
const TunnelFresh = 3 * time.Minute

// link follows one joined cluster.
type link struct {
	c      *Controller
	name   string
	cancel context.CancelFunc

	// remote reads the joined cluster; rebuilt when its token or spec changes.
	remote    *kube.Cluster
	remoteKey string
	// lastContact is when the remote API last answered; failingSince when
	// it stopped.
	lastContact, failingSince time.Time
	// seenVersion is the resourceVersion of the remote Announcement last
	// applied; applied the Peers written then.
	seenVersion string
	applied     map[string]kilov1.PeerSpec
	lastSweep   time.Time
}

func newLink(c *Controller, name string) *link { return &link{c: c, name: name} }

func (l *link) run(ctx context.Context) {
	tick := time.NewTicker(l.c.cfg.Poll)
	defer tick.Stop()
	wake := make(chan struct{}, 1)
	watching, stopWatch := "", func() {}
	defer func() { stopWatch() }()
	for {
		if err := l.step(ctx); err != nil && ctx.Err() == nil {
			l.c.log.Warn("remote cluster", "remote", l.name, "err", err)
		}
		// (Re)start the watch that wakes this loop when the remote client
		// is new (first read, renewed token, changed spec).
		if l.remote != nil && l.remote.Config != nil && l.remoteKey != watching {
			stopWatch()
			watching, stopWatch = l.remoteKey, func() {}
			if start, err := watchAnnouncements(l.remote.Config); err == nil {
				wctx, cancel := context.WithCancel(ctx)
				stopWatch = cancel
				go wakeOnChange(wctx, start, l.c.cfg.Poll, wake)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-wake:
		}
	}
}

// step reads the remote once, updates the Peers when a full read succeeded,
// and writes the RemoteCluster's status if it changed.
func (l *link) step(ctx context.Context) error {
	local := l.c.cfg.Local.Client
	var rc fedv1.RemoteCluster
	if err := local.Get(ctx, client.ObjectKey{Name: l.name}, &rc); err != nil {
		return client.IgnoreNotFound(err)
	}
	st := rc.Status.DeepCopy()
	now := time.Now()

	ann, credErr, apiErr := l.read(ctx, &rc, st, now)
	switch {
	case credErr != nil:
		setCondition(st, fedv1.CredentialsValid, false, reasonOf(credErr), credErr.Error())
	case apiErr == nil:
		setCondition(st, fedv1.CredentialsValid, true, "TokenAccepted", "the remote API server accepts the token")
	}
	if apiErr != nil || credErr != nil {
		err := errors.Join(credErr, apiErr)
		if l.failingSince.IsZero() {
			l.failingSince = now
			l.c.log.Warn("remote API not answering: keeping its Peers as they are", "remote", l.name, "err", err)
		}
		msg := fmt.Sprintf("no answer since %s (%s ago): %v; its Peers are kept as last read, so the tunnels keep carrying traffic", l.failingSince.UTC().Format(time.RFC3339), now.Sub(l.failingSince).Round(time.Second), err)
		if credErr == nil {
			setCondition(st, fedv1.APIReachable, false, "Unreachable", msg)
		}
		st.APIReachable = "False"
	} else {
		if !l.failingSince.IsZero() {
			l.c.log.Info("remote API answering again", "remote", l.name, "after", now.Sub(l.failingSince).Round(time.Second))
			l.failingSince = time.Time{}
		}
		l.lastContact = now
		setCondition(st, fedv1.APIReachable, true, "Answering", "the remote API server answers")
		st.APIReachable = "True"
		if st.LastContact == nil || now.Sub(st.LastContact.Time) > 30*time.Second {
			st.LastContact = &metav1.Time{Time: now}
		}
		if err := l.mirror(ctx, &rc, ann, st); err != nil {
			return err
		}
	}
	if err := l.tunnels(ctx, st, now); err != nil {
		return err
	}
	ready := true
	var notReady []string
	for _, t := range []string{fedv1.CredentialsValid, fedv1.APIReachable, fedv1.CIDRsDisjoint, fedv1.TunnelsUp} {
		if c := meta.FindStatusCondition(st.Conditions, t); c == nil || c.Status != metav1.ConditionTrue {
			ready = false
			notReady = append(notReady, t)
		}
	}
	if ready {
		setCondition(st, fedv1.Ready, true, "Linked", "the remote cluster is read, its ranges are disjoint and the tunnels are up")
	} else {
		setCondition(st, fedv1.Ready, false, "NotLinked", "not true: "+strings.Join(notReady, ", "))
	}
	l.c.cfg.Metrics.remoteState(l.name, st)
	if reflect.DeepEqual(*st, rc.Status) {
		return nil
	}
	rc.Status = *st
	if err := local.Status().Update(ctx, &rc); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("write RemoteCluster %s status: %w", rc.Name, err)
	}
	return nil
}

// read returns the remote's Announcement; a credentials problem (missing
// Secret, refused token) or an API that does not answer are returned apart.
func (l *link) read(ctx context.Context, rc *fedv1.RemoteCluster, st *fedv1.RemoteClusterStatus, now time.Time) (ann *fedv1.Announcement, credErr, apiErr error) {
	remote, token, err := l.client(ctx, rc)
	if err != nil {
		return nil, err, nil
	}
	if _, exp, err := join.TokenLifetime(token); err == nil {
		st.TokenExpiration = &metav1.Time{Time: exp}
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var a fedv1.Announcement
	err = remote.Client.Get(rctx, client.ObjectKey{Namespace: fedv1.Namespace, Name: fedv1.AnnouncementName}, &a)
	switch {
	case err == nil:
		l.renew(ctx, rc, remote, token, now)
		return &a, nil, nil
	case apierrors.IsUnauthorized(err):
		return nil, fmt.Errorf("the remote refuses the token (expired or revoked: run kilofed join again): %w", err), nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("the token may not read the remote's Announcement (its Role was changed: run kilofed join again): %w", err), nil
	case apierrors.IsNotFound(err):
		// The API answers, the remote has not announced yet: a full read of nothing.
		return &fedv1.Announcement{}, nil, nil
	}
	return nil, nil, err
}

// client returns a client of the remote with the token in its Secret.
func (l *link) client(ctx context.Context, rc *fedv1.RemoteCluster) (*kube.Cluster, string, error) {
	var s corev1.Secret
	key := client.ObjectKey{Namespace: fedv1.Namespace, Name: rc.Spec.CredentialsSecret}
	if err := l.c.cfg.Local.Client.Get(ctx, key, &s); err != nil {
		return nil, "", fmt.Errorf("read the credentials Secret %s: %w", key, err)
	}
	token := string(s.Data["token"])
	if token == "" {
		return nil, "", fmt.Errorf("the credentials Secret %s has no token: run kilofed join again", key)
	}
	k := rc.Spec.APIServer + "\x00" + string(rc.Spec.CABundle) + "\x00" + token
	if l.remote != nil && l.remoteKey == k {
		return l.remote, token, nil
	}
	cfg := &rest.Config{
		Host:            rc.Spec.APIServer,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: rc.Spec.CABundle},
		Timeout:         5 * time.Second,
		QPS:             20,
		Burst:           40,
		UserAgent:       "kilofed-controller/" + l.c.id,
	}
	remote, err := l.c.cfg.Dial(rc.Spec.ClusterID, cfg)
	if err != nil {
		return nil, "", err
	}
	l.remote, l.remoteKey = remote, k
	return remote, token, nil
}

// renew asks the remote for a fresh token once two thirds of the current
// one's lifetime have passed, and stores it.
func (l *link) renew(ctx context.Context, rc *fedv1.RemoteCluster, remote *kube.Cluster, token string, now time.Time) {
	iat, exp, err := join.TokenLifetime(token)
	if err != nil || !dueForRenewal(iat, exp, now) {
		return
	}
	name := rc.Spec.ServiceAccount[strings.LastIndex(rc.Spec.ServiceAccount, "/")+1:]
	fresh, err := join.IssueToken(ctx, remote, name, exp.Sub(iat))
	if err != nil {
		l.c.log.Warn("token renewal failed; will retry", "remote", l.name, "expires", exp, "err", err)
		return
	}
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: rc.Spec.CredentialsSecret, Namespace: fedv1.Namespace},
		Data:       map[string][]byte{"token": []byte(fresh)},
	}
	if err := l.c.cfg.Local.Client.Patch(ctx, s, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		l.c.log.Warn("store the renewed token", "remote", l.name, "err", err)
		return
	}
	l.c.log.Info("token renewed", "remote", l.name, "old expiry", exp)
}

// dueForRenewal reports whether a token issued at iat and expiring at exp
// should be renewed at now: once two thirds of its lifetime have passed, so
// that a renewal failing for a while (the remote API down) still leaves a
// third of it to retry in.
func dueForRenewal(iat, exp, now time.Time) bool {
	return !iat.IsZero() && exp.After(iat) && !now.Before(iat.Add(exp.Sub(iat)*2/3))
}

// mirror writes the Peers of ann's gateways and sweeps the stale ones: ann
// is a fresh, complete read.
func (l *link) mirror(ctx context.Context, rc *fedv1.RemoteCluster, ann *fedv1.Announcement, st *fedv1.RemoteClusterStatus) error {
	if ann.Spec.ClusterID != "" && ann.Spec.ClusterID != rc.Spec.ClusterID {
		setCondition(st, fedv1.CIDRsDisjoint, false, "WrongCluster",
			fmt.Sprintf("the cluster at %s announces the ID %q, not %q: it is not the joined cluster; nothing of it is routed", rc.Spec.APIServer, ann.Spec.ClusterID, rc.Spec.ClusterID))
		return nil
	}
	localRanges, err := l.c.localRanges(ctx)
	if err != nil {
		return fmt.Errorf("local ranges: %w", err)
	}
	others, err := l.others(ctx)
	if err != nil {
		return err
	}
	res := mirror.Peers(ann.Spec, localRanges, others, 0)
	st.Announced = &fedv1.AnnouncedRanges{PodCIDRs: ann.Spec.PodCIDRs, ServiceCIDRs: ann.Spec.ServiceCIDRs, WireGuardSubnet: ann.Spec.WireGuardSubnet}
	st.AcceptedCIDRs = nil
	for _, r := range res.Accepted {
		st.AcceptedCIDRs = append(st.AcceptedCIDRs, r.Prefix.String())
	}
	st.RefusedCIDRs = nil
	var msgs []string
	for _, c := range res.Conflicts {
		st.RefusedCIDRs = append(st.RefusedCIDRs, c.Range.Prefix.String())
		msgs = append(msgs, c.Error())
	}
	if len(msgs) == 0 {
		setCondition(st, fedv1.CIDRsDisjoint, true, "Disjoint", "every range of the remote is disjoint from this cluster's and the other members'")
	} else {
		setCondition(st, fedv1.CIDRsDisjoint, false, "Overlap", strings.Join(msgs, "; ")+" (those ranges are not routed; the rest is)")
	}
	if len(res.Problems) > 0 {
		l.c.log.Warn("remote announcement partly refused", "remote", l.name, "problems", res.Problems)
	}
	st.Gateways = int32(len(res.Peers))
	if err := l.applyPeers(ctx, rc, ann, res.Peers); err != nil {
		l.c.cfg.Metrics.syncError(l.name)
		return err
	}
	return nil
}

// others returns the announced ranges of the other joined clusters.
func (l *link) others(ctx context.Context) ([]ranges.Cluster, error) {
	var list fedv1.RemoteClusterList
	if err := l.c.cfg.Local.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list RemoteClusters: %w", err)
	}
	var out []ranges.Cluster
	for _, rc := range list.Items {
		if rc.Name != l.name {
			out = append(out, join.AnnouncedRanges(rc))
		}
	}
	return out, nil
}

// applyPeers makes the Peers labelled for this remote exactly desired.
// Unchanged Peers are not written; the full list is compared with the API
// every resync period.
func (l *link) applyPeers(ctx context.Context, rc *fedv1.RemoteCluster, ann *fedv1.Announcement, desired []kilov1.Peer) error {
	want := map[string]kilov1.PeerSpec{}
	for _, p := range desired {
		want[p.Name] = p.Spec
	}
	resync := time.Since(l.lastSweep) > l.c.cfg.Resync
	if !resync && reflect.DeepEqual(want, l.applied) {
		return nil
	}
	local := l.c.cfg.Local.Client
	owner := metav1.OwnerReference{APIVersion: fedv1.SchemeGroupVersion.String(), Kind: "RemoteCluster", Name: rc.Name, UID: rc.UID}
	for i := range desired {
		p := desired[i]
		old, known := l.applied[p.Name]
		unchanged := known && reflect.DeepEqual(old, p.Spec)
		if unchanged && !resync {
			continue
		}
		p.OwnerReferences = []metav1.OwnerReference{owner}
		if err := local.Patch(ctx, &p, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("write Peer %s: %w", p.Name, err)
		}
		if unchanged {
			// The periodic re-apply of an unchanged Peer (repairs an edit
			// by hand; a no-op for the API server otherwise).
			l.c.log.Debug("Peer re-applied", "remote", l.name, "peer", p.Name)
			continue
		}
		l.c.log.Info("Peer written", "remote", l.name, "peer", p.Name, "key", p.Spec.PublicKey[:8], "allowedIPs", p.Spec.AllowedIPs)
	}
	var have kilov1.PeerList
	if err := local.List(ctx, &have, client.MatchingLabels{mirror.LabelRemote: rc.Spec.ClusterID, mirror.LabelManagedBy: mirror.ManagedBy}); err != nil {
		return fmt.Errorf("list Peers of %s: %w", rc.Spec.ClusterID, err)
	}
	for i := range have.Items {
		p := &have.Items[i]
		if _, ok := want[p.Name]; ok {
			continue
		}
		if err := client.IgnoreNotFound(local.Delete(ctx, p)); err != nil {
			return fmt.Errorf("delete stale Peer %s: %w", p.Name, err)
		}
		l.c.log.Info("stale Peer deleted", "remote", l.name, "peer", p.Name)
	}
	l.applied = want
	l.lastSweep = time.Now()
	if ann.ResourceVersion != l.seenVersion {
		l.seenVersion = ann.ResourceVersion
		l.c.cfg.Metrics.synced(l.name, ann)
	}
	return nil
}

// tunnels counts the mirrored Peers with a fresh handshake.
func (l *link) tunnels(ctx context.Context, st *fedv1.RemoteClusterStatus, now time.Time) error {
	var have kilov1.PeerList
	if err := l.c.cfg.Local.Client.List(ctx, &have, client.MatchingLabels{mirror.LabelRemote: l.name, mirror.LabelManagedBy: mirror.ManagedBy}); err != nil {
		return fmt.Errorf("list Peers of %s: %w", l.name, err)
	}
	var up int32
	var latest *metav1.Time
	for _, p := range have.Items {
		hs := p.Status.LatestHandshake
		if hs == nil {
			continue
		}
		l.c.cfg.Metrics.handshake(l.name, p.Name, hs.Time)
		if now.Sub(hs.Time) < TunnelFresh {
			up++
		}
		if latest == nil || hs.After(latest.Time) {
			latest = hs.DeepCopy()
		}
	}
	st.TunnelsUp = up
	st.LatestHandshake = latest
	switch {
	case len(have.Items) == 0:
		setCondition(st, fedv1.TunnelsUp, false, "NoGateways", "no gateway of the remote is mirrored yet")
	case up == 0:
		setCondition(st, fedv1.TunnelsUp, false, "NoHandshake",
			fmt.Sprintf("none of the %d tunnels had a handshake in the last %s: check that UDP reaches the gateways (wg show on a leader, tcpdump on port 51820)", len(have.Items), TunnelFresh))
	default:
		setCondition(st, fedv1.TunnelsUp, true, "Handshaking", fmt.Sprintf("%d of %d tunnels had a handshake in the last %s", up, len(have.Items), TunnelFresh))
	}
	return nil
}

func setCondition(st *fedv1.RemoteClusterStatus, t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg})
}

func reasonOf(err error) string {
	switch {
	case apierrors.IsUnauthorized(errors.Unwrap(err)):
		return "TokenRefused"
	case apierrors.IsForbidden(errors.Unwrap(err)):
		return "Forbidden"
	}
	return "SecretMissing"
}
