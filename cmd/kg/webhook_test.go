package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
)

func TestWebhookFlagsOfKilo(t *testing.T) {
	o, err := parseWebhookFlags([]string{"--cert-file=/run/secrets/tls/tls.crt", "--key-file=/run/secrets/tls/tls.key", "--listen-metrics=:1107", "--listen=:8443"})
	if err != nil {
		t.Fatal(err)
	}
	want := webhookOptions{certFile: "/run/secrets/tls/tls.crt", keyFile: "/run/secrets/tls/tls.key", listen: ":8443", listenMetrics: ":1107", logLevel: "info"}
	if o != want {
		t.Errorf("options %+v, want %+v", o, want)
	}
	if _, err := parseWebhookFlags(nil); err == nil || !strings.Contains(err.Error(), "--cert-file") {
		t.Errorf("no certificate: %v, want an error naming --cert-file", err)
	}
}

func TestWebhookValidatesPeers(t *testing.T) {
	const key = "GDW0QyxVQVu0Hh0Ab6ENm8lp36mjQxgLPUl4Vzi+iDM="
	for _, tc := range []struct {
		name, peer  string
		allowed     bool
		wantMessage string
	}{
		{
			name:    "a valid Peer",
			peer:    `{"apiVersion":"kilo.squat.ai/v1alpha1","kind":"Peer","metadata":{"name":"squat"},"spec":{"allowedIPs":["10.5.0.1/32"],"publicKey":"` + key + `","persistentKeepalive":10}}`,
			allowed: true,
		},
		{
			name:        "no allowed IPs, bad key",
			peer:        `{"apiVersion":"kilo.squat.ai/v1alpha1","kind":"Peer","metadata":{"name":"bad"},"spec":{"allowedIPs":[],"publicKey":"nope"}}`,
			wantMessage: "publicKey",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","operation":"CREATE","object":` + tc.peer + `}}`
			reviews := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reviews"}, []string{"verdict"})
			rec := httptest.NewRecorder()
			validatePeers(reviews, slog.New(slog.DiscardHandler)).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate", bytes.NewBufferString(review)))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Kind != "AdmissionReview" || got.Response == nil || got.Response.UID != "u-1" {
				t.Fatalf("response %s lacks the review's kind or uid", rec.Body)
			}
			if got.Response.Allowed != tc.allowed {
				t.Errorf("allowed = %v, want %v (%s)", got.Response.Allowed, tc.allowed, rec.Body)
			}
			if tc.wantMessage != "" && (got.Response.Result == nil || !strings.Contains(got.Response.Result.Message, tc.wantMessage)) {
				t.Errorf("denial %s does not mention %q", rec.Body, tc.wantMessage)
			}
		})
	}
}
