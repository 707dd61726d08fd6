package workload

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stringsBuilder is a strings.Builder usable as an io.Writer value.
type stringsBuilder = strings.Builder

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			io.WriteString(w, "pod-a cluster-a node-a\n")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	refused := "http://127.0.0.1:" + strconv.Itoa(freePort(t, "tcp")) + "/"

	tests := []struct {
		name    string
		args    []string
		wantOut string
		wantErr error // nil: no error; errAny: any error
	}{
		{name: "body printed", args: []string{"get", srv.URL + "/ok"}, wantOut: "pod-a cluster-a node-a\n"},
		{name: "flag after url", args: []string{"get", srv.URL + "/ok", "--timeout", "2s"}, wantOut: "pod-a cluster-a node-a\n"},
		{name: "flag before url", args: []string{"get", "--timeout=2s", srv.URL + "/ok"}, wantOut: "pod-a cluster-a node-a\n"},
		{name: "204 is success", args: []string{"get", srv.URL + "/empty"}},
		{name: "500 fails", args: []string{"get", srv.URL + "/fail"}, wantOut: "boom\n", wantErr: ErrStatus},
		{name: "refused fails", args: []string{"get", refused}, wantErr: errAny},
		{name: "no url", args: []string{"get"}, wantErr: ErrUsage},
		{name: "two urls", args: []string{"get", srv.URL, srv.URL}, wantErr: ErrUsage},
		{name: "bad timeout", args: []string{"get", srv.URL, "--timeout", "soon"}, wantErr: ErrUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := run(context.Background(), tt.args, &out, io.Discard)
			checkErr(t, err, tt.wantErr)
			if diff := cmp.Diff(tt.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

// errAny stands for "some error" in test tables.
var errAny = errors.New("any error")

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("error = %v, want none", err)
	case want == errAny && err == nil:
		t.Error("error = nil, want an error")
	case want != nil && want != errAny && !errors.Is(err, want):
		t.Errorf("error = %v, want %v", err, want)
	}
}

func TestUDPSend(t *testing.T) {
	echo := startUDP(t)
	// A socket that never answers.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	tests := []struct {
		name    string
		args    []string
		wantOut string
		wantErr error
	}{
		{name: "reply printed", args: []string{"udp-send", echo, "ping-42"}, wantOut: "ping-42\n"},
		{name: "no reply times out", args: []string{"udp-send", silent.LocalAddr().String(), "hello", "--timeout", "300ms"}, wantErr: errAny},
		{name: "missing message", args: []string{"udp-send", echo}, wantErr: ErrUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := run(context.Background(), tt.args, &out, io.Discard)
			checkErr(t, err, tt.wantErr)
			if diff := cmp.Diff(tt.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}
