package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Timeouts of the kubelet API.
const (
	apiShutdownTimeout    = 5 * time.Second
	apiReadHeaderTimeout  = 10 * time.Second
	execIdleTimeout       = 4 * time.Hour // the kubelet's streamingConnectionIdleTimeout
	execStreamsTimeout    = 30 * time.Second
	logFollowPollInterval = 200 * time.Millisecond
)

// ServingConfig describes the kubelet API endpoint that the API server
// proxies `kubectl exec`, `kubectl logs` and node proxy requests to.
type ServingConfig struct {
	// Listener accepts the API server's connections. Run serves HTTPS on
	// it and closes it when it returns. Its port becomes the Node's
	// status.daemonEndpoints.kubeletEndpoint.port.
	Listener net.Listener
	// Address is the address the API server dials, published as the
	// Node's InternalDNS address (the lab starts kube-apiserver with
	// --kubelet-preferred-address-types=InternalDNS,InternalIP,...). When
	// it is the zero Addr, the listener's IP is published.
	Address netip.Addr
	// Certificate is the kubelet's serving certificate (with Address as an
	// IP SAN when the API server checks it with
	// --kubelet-certificate-authority).
	Certificate tls.Certificate
	// ClientCAs verify client certificates: a client without a
	// certificate signed by one of them is refused during the TLS
	// handshake. The certificate's common name is the user, its
	// organizations the groups; each request is then authorized with a
	// SubjectAccessReview (nodes/proxy, nodes/healthz), as a real kubelet
	// in webhook mode does.
	ClientCAs *x509.CertPool
}

// validate checks a serving config.
func (s *ServingConfig) validate() error {
	if s == nil {
		return nil
	}
	var errs []error
	if s.Listener == nil {
		errs = append(errs, errors.New("serving: no Listener: pass the listener the kubelet API is served on"))
	} else if _, ok := s.Listener.Addr().(*net.TCPAddr); !ok {
		errs = append(errs, fmt.Errorf("serving: listener address %s is not TCP", s.Listener.Addr()))
	}
	if s.Certificate.PrivateKey == nil || len(s.Certificate.Certificate) == 0 {
		errs = append(errs, errors.New("serving: no Certificate: give the kubelet's serving certificate and key"))
	}
	if s.ClientCAs == nil {
		errs = append(errs, errors.New("serving: no ClientCAs: give the CA that signs the API server's kubelet client certificate"))
	}
	if s.Address.IsValid() || s.Listener == nil {
		return errors.Join(errs...)
	}
	if a := s.listenerAddr(); !a.Addr().IsValid() || a.Addr().IsUnspecified() {
		errs = append(errs, fmt.Errorf("serving: listener %s has no specific IP: set Address to the IP the API server dials", s.Listener.Addr()))
	}
	return errors.Join(errs...)
}

// listenerAddr returns the listener's address.
func (s *ServingConfig) listenerAddr() netip.AddrPort {
	if a, ok := s.Listener.Addr().(*net.TCPAddr); ok {
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

// endpoint returns the address published as InternalDNS (invalid when the
// API is not served) and the port published as the kubelet endpoint.
func (s *ServingConfig) endpoint() (netip.Addr, int32) {
	if s == nil {
		return netip.Addr{}, kubeletPort
	}
	ap := s.listenerAddr()
	addr := s.Address
	if !addr.IsValid() {
		addr = ap.Addr().Unmap()
	}
	return addr, int32(ap.Port())
}

// serveAPI serves the kubelet API on the configured listener until ctx
// ends. Exec sessions are hijacked connections that Shutdown does not wait
// for: they end when their pod is torn down (ctx ends them all).
func (k *kubelet) serveAPI(ctx context.Context) {
	s := k.cfg.Serving
	srv := &http.Server{
		Handler:           k.apiHandler(),
		ReadHeaderTimeout: apiReadHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(k.log.Handler(), slog.LevelDebug),
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{s.Certificate},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    s.ClientCAs,
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(s.Listener, "", "") }()
	k.log.Info("kubelet API serving", "addr", s.Listener.Addr().String())
	select {
	case err := <-errc:
		k.log.Error("kubelet API stopped", "err", err)
		return
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), apiShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		k.log.Warn("kubelet API shutdown", "err", err)
		_ = srv.Close()
	}
	<-errc
}

// apiHandler routes the kubelet API: the subset the API server proxies to.
func (k *kubelet) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(method+" /exec/{namespace}/{pod}/{container}", k.handleExec)
		mux.HandleFunc(method+" /exec/{namespace}/{pod}/{uid}/{container}", k.handleExec)
	}
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.handleLogs)
	return k.authenticate(mux)
}

// authenticate refuses requests without a verified client certificate and
// authorizes the others (see authorizer).
func (k *kubelet) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := userFromTLS(r.TLS)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb, subresources := requestAttributes(r.Method, r.URL.Path)
		allowed, reason, err := k.authz.authorize(r.Context(), u, verb, subresources)
		if err != nil {
			k.log.Warn("kubelet API authorization failed", "user", u.Name, "path", r.URL.Path, "err", err)
			http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, verb, subresources),
				http.StatusInternalServerError)
			return
		}
		if !allowed {
			k.log.Info("kubelet API request forbidden", "user", u.Name, "path", r.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, verb, subresources),
				http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
