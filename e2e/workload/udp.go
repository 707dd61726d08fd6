package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
)

// runUDP parses the udp subcommand and echoes datagrams until ctx ends.
func runUDP(ctx context.Context, args []string, logger *slog.Logger) error {
	fs := newFlagSet("udp")
	var ps ports
	fs.Var(&ps, "port", "UDP port to echo on (repeatable; default 9090)")
	ready := fs.String("ready-file", "", "file to create once listening")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if len(ps) == 0 {
		ps = ports{9090}
	}
	var conns []net.PacketConn
	for _, p := range ps {
		c, err := net.ListenPacket("udp", net.JoinHostPort("", strconv.Itoa(p)))
		if err != nil {
			closePackets(conns)
			return fmt.Errorf("udp echo: listen on port %d: %w", p, err)
		}
		conns = append(conns, c)
	}
	if err := markReady(*ready); err != nil {
		closePackets(conns)
		return err
	}
	return serveUDP(ctx, conns, logger)
}

// serveUDP sends every datagram received on conns back to its sender until
// ctx ends. It closes the connections.
func serveUDP(ctx context.Context, conns []net.PacketConn, logger *slog.Logger) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(conns))
	for _, c := range conns {
		logger.Info("udp echo serving", "addr", c.LocalAddr().String())
		wg.Go(func() {
			buf := make([]byte, 64*1024)
			for {
				n, from, err := c.ReadFrom(buf)
				if err != nil {
					if !errors.Is(err, net.ErrClosed) {
						errc <- fmt.Errorf("udp echo: read on %s: %w", c.LocalAddr(), err)
					}
					return
				}
				if _, err := c.WriteTo(buf[:n], from); err != nil {
					logger.Warn("udp echo: reply failed", "to", from.String(), "err", err)
				}
			}
		})
	}
	var err error
	select {
	case <-ctx.Done():
		logger.Info("udp echo stopping")
	case err = <-errc:
	}
	closePackets(conns)
	wg.Wait()
	return err
}

// closePackets closes packet connections.
func closePackets(conns []net.PacketConn) {
	for _, c := range conns {
		_ = c.Close()
	}
}
