package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
)

// Metrics are the federation controller's Prometheus metrics. A nil
// *Metrics records nothing.
type Metrics struct {
	ready      *prometheus.GaugeVec
	reachable  *prometheus.GaugeVec
	syncs      *prometheus.CounterVec
	syncErrors *prometheus.CounterVec
	lag        *prometheus.HistogramVec
	handshakes *prometheus.GaugeVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kilofed_remote_cluster_ready",
			Help: "1 when the joined cluster is Ready (read, disjoint, tunnels up)."}, []string{"remote"}),
		reachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kilofed_remote_cluster_api_reachable",
			Help: "1 when the joined cluster's API server answers."}, []string{"remote"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kilofed_peer_syncs_total",
			Help: "Syncs of the Peers mirrored from a joined cluster."}, []string{"remote"}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kilofed_peer_sync_errors_total",
			Help: "Failed syncs of the Peers mirrored from a joined cluster."}, []string{"remote"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kilofed_remote_change_to_peer_seconds",
			Help:    "From a change of a joined cluster's Announcement (its API server's time) to the local Peers written.",
			Buckets: []float64{.1, .25, .5, 1, 2, 5, 10, 30}}, []string{"remote"}),
		handshakes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kilofed_remote_gateway_latest_handshake_seconds",
			Help: "Unix time of the latest handshake with a joined cluster's gateway."}, []string{"remote", "peer"}),
	}
	reg.MustRegister(m.ready, m.reachable, m.syncs, m.syncErrors, m.lag, m.handshakes)
	return m
}

func (m *Metrics) remoteState(remote string, st *fedv1.RemoteClusterStatus) {
	if m == nil {
		return
	}
	b := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	ready := false
	for _, c := range st.Conditions {
		if c.Type == fedv1.Ready {
			ready = c.Status == "True"
		}
	}
	m.ready.WithLabelValues(remote).Set(b(ready))
	m.reachable.WithLabelValues(remote).Set(b(st.APIReachable == "True"))
}

func (m *Metrics) synced(remote string, ann *fedv1.Announcement) {
	if m == nil {
		return
	}
	m.syncs.WithLabelValues(remote).Inc()
	var changed time.Time
	for _, f := range ann.ManagedFields {
		if f.Time != nil && f.Time.After(changed) {
			changed = f.Time.Time
		}
	}
	if !changed.IsZero() {
		m.lag.WithLabelValues(remote).Observe(max(0, time.Since(changed).Seconds()))
	}
}

func (m *Metrics) syncError(remote string) {
	if m != nil {
		m.syncErrors.WithLabelValues(remote).Inc()
	}
}

func (m *Metrics) handshake(remote, peer string, t time.Time) {
	if m != nil {
		m.handshakes.WithLabelValues(remote, peer).Set(float64(t.Unix()))
	}
}

func (m *Metrics) forget(remote string) {
	if m == nil {
		return
	}
	m.ready.DeleteLabelValues(remote)
	m.reachable.DeleteLabelValues(remote)
	m.handshakes.DeletePartialMatch(prometheus.Labels{"remote": remote})
}
