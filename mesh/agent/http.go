package agent

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics (Prometheus), /health (liveness: 503 only when
// the reconcile loop is stuck, see Live), /ready (readiness: 503 with the
// errors of the last reconciliation, see Ready), /forwarding (503 when
// this node cannot forward: what the location election's standbys probe)
// and, with
// Config.ServeGraph, /graph (the topology as this agent computed it, in
// Graphviz DOT).
func (a *Agent) Handler(gather prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { reply(w, a.Live()) })
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) { reply(w, a.Ready()) })
	mux.HandleFunc("GET /forwarding", func(w http.ResponseWriter, r *http.Request) { reply(w, a.Forwarding()) })
	if a.cfg.ServeGraph {
		mux.HandleFunc("GET /graph", func(w http.ResponseWriter, r *http.Request) {
			t := a.Topology()
			if t == nil {
				http.Error(w, "no topology yet", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "text/vnd.graphviz")
			fmt.Fprint(w, t.DOT())
		})
	}
	return mux
}

// reply writes "ok", or err with 503.
func reply(w http.ResponseWriter, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// PeerNames maps the public keys of the last topology to node and Peer
// names, for DeviceCollector labels.
func (a *Agent) PeerNames() map[string]string {
	t := a.Topology()
	out := map[string]string{}
	if t == nil {
		return out
	}
	for i := range t.Segments {
		for _, n := range t.Segments[i].Nodes {
			out[n.Key.String()] = n.Name
		}
	}
	for _, p := range t.Peers {
		out[p.PublicKey.String()] = p.Name
	}
	return out
}
