package server

import (
	"log/slog"
	"net"
	"time"

	"github.com/miekg/dns"

	"github.com/kilofed/kilofed/dns/zone"
)

// DefaultUDPSize is the EDNS0 buffer size the server advertises and the
// largest UDP answer it sends (the DNS flag day 2020 value), when
// Config.UDPSize is zero.
const DefaultUDPSize = 1232

// DefaultForwardTimeout bounds one exchange with one upstream when
// Config.ForwardTimeout is zero.
const DefaultForwardTimeout = 2 * time.Second

// DefaultMaxForwards bounds the forwards in flight when Config.MaxForwards
// is zero.
const DefaultMaxForwards = 1000

// Config configures a Handler.
type Config struct {
	// Zone answers clusterset.local.
	Zone *zone.Zone
	// Ready reports whether the zone has its first full view; until then
	// clusterset.local names answer SERVFAIL, not a cacheable NXDOMAIN. Nil
	// means always ready.
	Ready func() bool
	// Upstreams are the host:port resolvers every other name is forwarded
	// to, tried in order until one answers; none means those names are
	// REFUSED.
	Upstreams []string
	// ForwardTimeout bounds one exchange with one upstream.
	ForwardTimeout time.Duration
	// MaxForwards bounds the queries being forwarded at once; past it, other
	// names answer SERVFAIL at once instead of piling up on a slow upstream.
	MaxForwards int
	// UDPSize is the EDNS0 buffer size advertised and the largest UDP answer.
	UDPSize uint16
	Metrics *Metrics
	Logger  *slog.Logger
}

// Handler answers DNS queries: clusterset.local from the zone, every other
// name from the upstreams.
type Handler struct {
	cfg Config
	log *slog.Logger
	// forwards holds a token per forward in flight.
	forwards chan struct{}
}

// NewHandler returns a Handler for cfg.
func NewHandler(cfg Config) *Handler {
	if cfg.ForwardTimeout == 0 {
		cfg.ForwardTimeout = DefaultForwardTimeout
	}
	if cfg.UDPSize < dns.MinMsgSize {
		cfg.UDPSize = DefaultUDPSize
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxForwards <= 0 {
		cfg.MaxForwards = DefaultMaxForwards
	}
	return &Handler{cfg: cfg, log: log, forwards: make(chan struct{}, cfg.MaxForwards)}
}

// Accept is the server's MsgAcceptFunc: it drops what is not a query and
// rejects, before parsing, what cannot be one query.
func (h *Handler) Accept(dh dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	switch {
	case dh.Bits&qr != 0:
		h.cfg.Metrics.malformed("dropped")
		return dns.MsgIgnore
	case int(dh.Bits>>11)&0xF != dns.OpcodeQuery:
		h.cfg.Metrics.malformed("notimp")
		return dns.MsgRejectNotImplemented
	case dh.Qdcount != 1 || dh.Ancount != 0 || dh.Nscount != 0 || dh.Arcount > 2:
		h.cfg.Metrics.malformed("formerr")
		return dns.MsgReject
	}
	return dns.MsgAccept
}

// Invalid is the server's MsgInvalidFunc: it counts packets that did not
// parse (answered FORMERR when their header parsed, else dropped).
func (h *Handler) Invalid(_ []byte, _ error) {
	h.cfg.Metrics.malformed("invalid")
}

// ServeDNS answers one query.
func (h *Handler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	resp, source := h.answer(r, tcp)
	if resp == nil {
		return
	}
	var qtype uint16
	if len(r.Question) == 1 {
		qtype = r.Question[0].Qtype
	}
	h.cfg.Metrics.query(qtype, resp.Rcode, source)
	if err := w.WriteMsg(resp); err != nil {
		h.log.Debug("write answer", "client", w.RemoteAddr().String(), "err", err)
	}
}

// answer computes the response to r and where it came from.
func (h *Handler) answer(r *dns.Msg, tcp bool) (*dns.Msg, string) {
	resp := new(dns.Msg)
	resp.SetReply(r)
	resp.RecursionAvailable = len(h.cfg.Upstreams) > 0
	var opt *dns.OPT
	nopt := 0
	for _, rr := range r.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			opt = o
			nopt++
		}
	}
	size := dns.MinMsgSize
	switch {
	case tcp:
		size = dns.MaxMsgSize
	case opt != nil:
		size = max(dns.MinMsgSize, min(int(opt.UDPSize()), int(h.cfg.UDPSize)))
	}
	finish := func(rcode int, source string) (*dns.Msg, string) {
		resp.Rcode = rcode
		if opt != nil {
			resp.SetEdns0(h.cfg.UDPSize, opt.Do())
		}
		resp.Compress = true
		resp.Truncate(size)
		return resp, source
	}
	if r.Response || r.Opcode != dns.OpcodeQuery {
		return finish(dns.RcodeNotImplemented, "server")
	}
	if len(r.Question) != 1 || nopt > 1 || len(r.Answer) > 0 || len(r.Ns) > 0 {
		resp.Question = nil
		return finish(dns.RcodeFormatError, "server")
	}
	if opt != nil && opt.Version() != 0 {
		resp.Question = nil
		return finish(dns.RcodeBadVers, "server")
	}
	if r.IsTsig() != nil {
		return finish(dns.RcodeRefused, "server")
	}
	q := r.Question[0]
	switch q.Qtype {
	case dns.TypeNone, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY:
		return finish(dns.RcodeFormatError, "server")
	case dns.TypeAXFR, dns.TypeIXFR:
		return finish(dns.RcodeRefused, "server")
	case dns.TypeMAILA, dns.TypeMAILB:
		return finish(dns.RcodeNotImplemented, "server")
	}
	if zone.Contains(q.Name) {
		if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
			return finish(dns.RcodeRefused, "clusterset")
		}
		if h.cfg.Ready != nil && !h.cfg.Ready() {
			return finish(dns.RcodeServerFailure, "clusterset")
		}
		res := h.cfg.Zone.Lookup(q.Name, q.Qtype)
		resp.Authoritative = true
		resp.Answer, resp.Ns, resp.Extra = res.Answer, res.Ns, res.Extra
		return finish(res.Rcode, "clusterset")
	}
	if h.cfg.Ready == nil || h.cfg.Ready() {
		if res, ok := h.cfg.Zone.LookupReverse(q.Name, q.Qtype); ok {
			resp.Authoritative = true
			resp.Answer = res.Answer
			return finish(res.Rcode, "clusterset")
		}
	}
	if len(h.cfg.Upstreams) == 0 {
		return finish(dns.RcodeRefused, "server")
	}
	up := h.forward(r, tcp)
	if up == nil {
		return finish(dns.RcodeServerFailure, "upstream")
	}
	resp.Answer, resp.Ns, resp.Extra = up.Answer, up.Ns, nil
	for _, rr := range up.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			resp.Extra = append(resp.Extra, rr)
		}
	}
	resp.Authoritative, resp.Truncated = up.Authoritative, up.Truncated
	resp.AuthenticatedData = up.AuthenticatedData
	return finish(up.Rcode, "upstream")
}
