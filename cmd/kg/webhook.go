package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

// webhookOptions are the flags of "kg webhook", Kilo's validating admission
// webhook for Peers (manifests/peer-validation.yaml).
type webhookOptions struct {
	certFile, keyFile     string
	listen, listenMetrics string
	logLevel              string
}

func parseWebhookFlags(args []string) (webhookOptions, error) {
	var o webhookOptions
	fs := flag.NewFlagSet("kg webhook", flag.ContinueOnError)
	fs.StringVar(&o.certFile, "cert-file", "", "TLS certificate of the webhook server")
	fs.StringVar(&o.keyFile, "key-file", "", "TLS private key of the webhook server")
	fs.StringVar(&o.listen, "listen", ":8443", "address of the webhook server (HTTPS, POST /validate)")
	fs.StringVar(&o.listenMetrics, "listen-metrics", ":1107", "address of the metrics server (/metrics, /health)")
	fs.StringVar(&o.logLevel, "log-level", "info", "all, debug, info, warn, error or none")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: kg webhook takes flags only", fs.Arg(0))
	}
	if o.certFile == "" || o.keyFile == "" {
		return o, errors.New("kg webhook needs --cert-file and --key-file (the webhook serves HTTPS to the API server)")
	}
	return o, nil
}

// validatePeers answers AdmissionReviews of Peers: allowed when the Peer
// passes v1alpha1.Peer.Validate, denied with every problem otherwise.
func validatePeers(reviews *prometheus.CounterVec, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("not an admission.k8s.io/v1 AdmissionReview with a request: %v", err), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		var p v1alpha1.Peer
		if err := json.Unmarshal(review.Request.Object.Raw, &p); err != nil {
			err = fmt.Errorf("not a Peer: %w", err)
			resp.Allowed, resp.Result = false, &metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Reason: metav1.StatusReasonBadRequest, Code: http.StatusBadRequest}
		} else if err := p.Validate(); err != nil {
			resp.Allowed, resp.Result = false, &metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity}
		}
		verdict := "allowed"
		if !resp.Allowed {
			verdict = "denied"
			log.Info("Peer denied", "peer", p.Name, "reason", resp.Result.Message)
		}
		reviews.WithLabelValues(verdict).Inc()
		out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// runWebhook serves the Peer validation webhook and its metrics until ctx is
// done.
func runWebhook(ctx context.Context, o webhookOptions, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reviews := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kilo_peer_validation_reviews_total",
		Help: "Peer admission reviews answered, by verdict.",
	}, []string{"verdict"})
	reg.MustRegister(reviews)
	mux := http.NewServeMux()
	mux.Handle("/validate", validatePeers(reviews, log))
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	metrics.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

	hook := &http.Server{Addr: o.listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	mon := &http.Server{Addr: o.listenMetrics, Handler: metrics, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- hook.ListenAndServeTLS(o.certFile, o.keyFile) }()
	go func() { errc <- mon.ListenAndServe() }()
	log.Info("Peer validation webhook running", "listen", o.listen, "listen-metrics", o.listenMetrics)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hook.Shutdown(sctx)
	_ = mon.Shutdown(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook server: %w", err)
	}
	return nil
}
