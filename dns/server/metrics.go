package server

import (
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the server's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	queries  *prometheus.CounterVec
	forward  *prometheus.HistogramVec
	dropped  *prometheus.CounterVec
	services prometheus.GaugeFunc
}

// NewMetrics registers the server's metrics with reg; services, if not nil,
// is read for the gauge of served services.
func NewMetrics(reg prometheus.Registerer, services func() int) *Metrics {
	m := &Metrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kilofed_dns_queries_total",
			Help: "DNS queries answered, by query type, response code and source (clusterset: from the zone; upstream: forwarded; server: refused or rejected before either).",
		}, []string{"type", "rcode", "source"}),
		forward: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kilofed_dns_forward_duration_seconds",
			Help:    "Time of one exchange with an upstream resolver, by upstream and result (an rcode, or error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"upstream", "result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kilofed_dns_malformed_total",
			Help: "Packets received that were not a well-formed query, by action (formerr: answered FORMERR; notimp: answered NOTIMP; dropped: no answer).",
		}, []string{"action"}),
	}
	reg.MustRegister(m.queries, m.forward, m.dropped)
	if services != nil {
		m.services = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kilofed_dns_services",
			Help: "Services the clusterset.local zone has records for.",
		}, func() float64 { return float64(services()) })
		reg.MustRegister(m.services)
	}
	return m
}

func (m *Metrics) query(qtype uint16, rcode int, source string) {
	if m == nil {
		return
	}
	t, ok := dns.TypeToString[qtype]
	if !ok {
		t = "other"
	}
	rc := rcodeName(rcode)
	m.queries.WithLabelValues(t, rc, source).Inc()
}

// rcodeName names an rcode; 16 is BADVERS here, since TSIG is not served.
func rcodeName(rcode int) string {
	if rcode == dns.RcodeBadVers {
		return "BADVERS"
	}
	if s, ok := dns.RcodeToString[rcode]; ok {
		return s
	}
	return "other"
}

func (m *Metrics) forwarded(upstream, result string, seconds float64) {
	if m != nil {
		m.forward.WithLabelValues(upstream, result).Observe(seconds)
	}
}

func (m *Metrics) malformed(action string) {
	if m != nil {
		m.dropped.WithLabelValues(action).Inc()
	}
}
