package server

import (
	"context"
	"time"

	"github.com/miekg/dns"
)

// forward sends r to the upstreams in order over the client's transport and
// returns the first answer, or nil if none answered or too many forwards are
// in flight.
func (h *Handler) forward(r *dns.Msg, tcp bool) *dns.Msg {
	select {
	case h.forwards <- struct{}{}:
		defer func() { <-h.forwards }()
	default:
		h.log.Debug("forward: too many in flight", "name", r.Question[0].Name, "max", cap(h.forwards))
		return nil
	}
	network := "udp"
	if tcp {
		network = "tcp"
	}
	c := &dns.Client{Net: network, Timeout: h.cfg.ForwardTimeout}
	m := r.Copy()
	for _, up := range h.cfg.Upstreams {
		m.Id = dns.Id()
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.ForwardTimeout)
		start := time.Now()
		in, _, err := c.ExchangeContext(ctx, m, up)
		cancel()
		if err != nil {
			h.cfg.Metrics.forwarded(up, "error", time.Since(start).Seconds())
			h.log.Debug("forward", "upstream", up, "name", r.Question[0].Name, "err", err)
			continue
		}
		h.cfg.Metrics.forwarded(up, rcodeName(in.Rcode), time.Since(start).Seconds())
		return in
	}
	return nil
}
