package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// identity is what the HTTP echo server answers with.
type identity struct {
	Pod, Namespace, Cluster, Node string
}

// runHTTP parses the http subcommand and serves until ctx ends.
func runHTTP(ctx context.Context, args []string, logger *slog.Logger) error {
	fs := newFlagSet("http")
	var ps ports
	var id identity
	fs.Var(&ps, "port", "TCP port to serve (repeatable; default 8080)")
	fs.StringVar(&id.Pod, "name", envOr("KFL_POD_NAME", ""), "pod name to answer with")
	fs.StringVar(&id.Namespace, "namespace", envOr("KFL_POD_NAMESPACE", ""), "pod namespace")
	fs.StringVar(&id.Cluster, "cluster", envOr("KFL_CLUSTER", ""), "cluster name to answer with")
	fs.StringVar(&id.Node, "node", envOr("KFL_NODE_NAME", ""), "node name to answer with")
	ready := fs.String("ready-file", "", "file to create once listening")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if len(ps) == 0 {
		ps = ports{8080}
	}
	var lns []net.Listener
	for _, p := range ps {
		ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(p)))
		if err != nil {
			closeAll(lns)
			return fmt.Errorf("http echo: listen on port %d: %w", p, err)
		}
		lns = append(lns, ln)
	}
	if err := markReady(*ready); err != nil {
		closeAll(lns)
		return err
	}
	return serveHTTP(ctx, lns, id, logger)
}

// echoHandler answers every path with the identity line, /healthz with ok
// (503 unready after /healthz/fail, until /healthz/pass), and /bytes/N
// with N bytes.
func echoHandler(id identity, logger *slog.Logger) http.Handler {
	body := fmt.Sprintf("%s %s %s\n", id.Pod, id.Cluster, id.Node)
	mux := http.NewServeMux()
	mux.HandleFunc("/bytes/{n}", bytesHandler(logger))
	var unhealthy atomic.Bool
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if unhealthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "unready")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	for path, fail := range map[string]bool{"/healthz/fail": true, "/healthz/pass": false} {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			unhealthy.Store(fail)
			logger.Info("healthz switched", "failing", fail)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, "ok")
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		logger.Debug("request", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Pod-Namespace", id.Namespace)
		fmt.Fprint(w, body)
	})
	return mux
}

// serveHTTP serves the echo handler on every listener until ctx ends, then
// shuts down gracefully. It closes the listeners.
func serveHTTP(ctx context.Context, lns []net.Listener, id identity, logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           echoHandler(id, logger),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		logger.Info("http echo serving", "addr", ln.Addr().String(), "pod", id.Pod, "cluster", id.Cluster, "node", id.Node)
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			_ = srv.Close()
			return fmt.Errorf("http echo: serve: %w", err)
		}
	}
	logger.Info("http echo stopping")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// closeAll closes listeners opened before a failure.
func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		_ = ln.Close()
	}
}
