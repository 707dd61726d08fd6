package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// maxQuerySize is the largest UDP query read; a longer datagram is cut to it,
// fails to parse and is answered FORMERR when its header parses.
const maxQuerySize = 4096

// Server serves a Handler on one UDP and one TCP socket of the same address.
type Server struct {
	udp, tcp *dns.Server
	pc       net.PacketConn
	ln       net.Listener
}

// Listen binds UDP and TCP on addr (host:port; port 0 picks one free for
// both).
func Listen(addr string, h *Handler) (*Server, error) {
	pc, ln, err := listen(addr)
	if err != nil {
		return nil, err
	}
	s := &Server{pc: pc, ln: ln}
	for _, srv := range []**dns.Server{&s.udp, &s.tcp} {
		*srv = &dns.Server{Handler: h, UDPSize: maxQuerySize, MsgAcceptFunc: h.Accept, MsgInvalidFunc: h.Invalid,
			ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
	}
	s.udp.PacketConn, s.tcp.Listener = pc, ln
	return s, nil
}

// listen binds UDP and TCP on the same port of addr.
func listen(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dns listen address %q: %w", addr, err)
	}
	for try := 0; ; try++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns listen udp %s: %w", addr, err)
		}
		p := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, p))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		// With port 0, the TCP port of the UDP port picked may be taken: pick again.
		if port != "0" || try == 20 {
			return nil, nil, fmt.Errorf("dns listen tcp %s: %w", addr, err)
		}
	}
}

// Addr returns the address served (the same port for UDP and TCP).
func (s *Server) Addr() string { return s.pc.LocalAddr().String() }

// Serve answers queries until ctx is done, then stops both sockets.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		go func() { errc <- srv.ActivateAndServe() }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		// An error here is a server not started yet: closing its socket
		// below ends it.
		_ = srv.ShutdownContext(shut)
	}
	s.pc.Close()
	s.ln.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("dns serve %s: %w", s.Addr(), err)
	}
	return nil
}
