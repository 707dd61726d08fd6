package agent

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus metrics, named like Kilo's where Kilo
// has them (kilo_nodes, kilo_peers, kilo_leader, kilo_reconcile_errors_total).
type Metrics struct {
	nodes            prometheus.Gauge
	peers            prometheus.Gauge
	leader           *prometheus.GaugeVec
	reconciles       prometheus.Counter
	reconcileErrors  prometheus.Counter
	leaderChanges    prometheus.Counter
	keyRotations     prometheus.Counter
	problems         *prometheus.GaugeVec
	lastReconcileSec prometheus.Gauge
	stepErrors       *prometheus.GaugeVec
}

// NewMetrics creates the agent's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kilo_nodes", Help: "Number of nodes in the mesh.",
		}),
		peers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kilo_peers", Help: "Number of WireGuard peers configured on this node.",
		}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kilo_leader", Help: "1 when this node is the leader (gateway) of its location.",
		}, []string{"location"}),
		reconciles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kilo_reconciles_total", Help: "Number of reconciliations.",
		}),
		reconcileErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kilo_reconcile_errors_total", Help: "Number of reconciliations that failed.",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kilo_leader_changes_total", Help: "Number of times the leader of a location changed, as seen by this node.",
		}),
		keyRotations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kilo_key_rotations_total", Help: "Number of WireGuard key rotations this agent made on request (kilo.squat.ai/rotate-key).",
		}),
		problems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kilo_problems", Help: "Nodes and Peers with a problem (kind=node|peer, severity=warning|excluded).",
		}, []string{"kind", "severity"}),
		lastReconcileSec: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kilo_last_reconcile_timestamp_seconds", Help: "Unix time of the last successful reconciliation.",
		}),
		stepErrors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kilo_reconcile_step_errors",
			Help: "1 for each step (key, topology, publish, wireguard, address, link, encapsulation, routes, firewall) that failed in the last reconciliation, else 0.",
		}, []string{"step"}),
	}
	reg.MustRegister(m.nodes, m.peers, m.leader, m.reconciles, m.reconcileErrors, m.leaderChanges,
		m.keyRotations, m.problems, m.lastReconcileSec, m.stepErrors)
	return m
}
