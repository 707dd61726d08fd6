package workload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHTTPBytes(t *testing.T) {
	addr := startHTTP(t, identity{Pod: "echo-scw-2", Cluster: "meta", Node: "scw-2"})
	chunk := int64(len(streamChunk))
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantLen    int64 // body length when wantStatus is 200
	}{
		{name: "zero", path: "/bytes/0", wantStatus: 200, wantLen: 0},
		{name: "one", path: "/bytes/1", wantStatus: 200, wantLen: 1},
		{name: "exactly one chunk", path: "/bytes/" + strconv.FormatInt(chunk, 10), wantStatus: 200, wantLen: chunk},
		{name: "chunks and a tail", path: "/bytes/" + strconv.FormatInt(3*chunk+7, 10), wantStatus: 200, wantLen: 3*chunk + 7},
		{name: "50 MB", path: "/bytes/50000000", wantStatus: 200, wantLen: 50_000_000},
		{name: "not a number", path: "/bytes/lots", wantStatus: 400},
		{name: "negative", path: "/bytes/-1", wantStatus: 400},
		{name: "above the maximum", path: "/bytes/" + strconv.FormatInt(MaxStreamBytes+1, 10), wantStatus: 400},
		{name: "no N is the echo", path: "/bytes/", wantStatus: 200, wantLen: int64(len("echo-scw-2 meta scw-2\n"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get("http://" + addr + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus != 200 {
				return
			}
			if !strings.HasPrefix(tt.path, "/bytes/") || tt.path == "/bytes/" {
				return
			}
			if resp.ContentLength != tt.wantLen {
				t.Errorf("Content-Length = %d, want %d", resp.ContentLength, tt.wantLen)
			}
			// Compare the body with the pattern it should repeat, without
			// holding it whole.
			var got int64
			buf := make([]byte, 100_003) // not a multiple of the chunk
			for {
				n, err := resp.Body.Read(buf)
				for i := range n {
					if want := byte('a' + (got+int64(i))%chunk%26); buf[i] != want {
						t.Fatalf("byte %d = %q, want %q", got+int64(i), buf[i], want)
					}
				}
				got += int64(n)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("read body after %d bytes: %v", got, err)
				}
			}
			if got != tt.wantLen {
				t.Errorf("body has %d bytes, want %d", got, tt.wantLen)
			}
		})
	}
}

// nullResponse is a ResponseWriter that drops the body and allocates
// nothing on Write.
type nullResponse struct {
	h       http.Header
	written int64
}

func (r *nullResponse) Header() http.Header { return r.h }
func (r *nullResponse) WriteHeader(int)     {}
func (r *nullResponse) Write(p []byte) (int, error) {
	r.written += int64(len(p))
	return len(p), nil
}

// TestHTTPBytesAllocations checks that /bytes/N allocates the same for
// 1 MB as for 1 GB: the body comes from the shared chunk.
func TestHTTPBytesAllocations(t *testing.T) {
	h := echoHandler(identity{}, discardLogger())
	allocs := func(n int64) float64 {
		req, err := http.NewRequest(http.MethodGet, "/bytes/"+strconv.FormatInt(n, 10), nil)
		if err != nil {
			t.Fatal(err)
		}
		w := &nullResponse{h: http.Header{}}
		a := testing.AllocsPerRun(3, func() {
			w.written = 0
			h.ServeHTTP(w, req)
		})
		if w.written != n {
			t.Fatalf("/bytes/%d wrote %d bytes", n, w.written)
		}
		return a
	}
	small, large := allocs(1_000_000), allocs(1_000_000_000)
	if large > small {
		t.Errorf("/bytes/N allocates %.0f times for 1 GB and %.0f times for 1 MB, want no more for more bytes", large, small)
	}
}

// transferLine is what get --discard prints.
var transferLine = regexp.MustCompile(`^bytes=(\d+) seconds=(\d+\.\d{6}) mbps=(\d+\.\d{3})\n$`)

func TestGetDiscard(t *testing.T) {
	addr := startHTTP(t, identity{Pod: "echo-aws-2", Cluster: "meta", Node: "aws-2"})
	badN := fmt.Sprintf("/bytes/N: N must be an integer between 0 and %d, got %q\n", int64(MaxStreamBytes), "x")
	tests := []struct {
		name      string
		args      []string
		wantBytes int64
		wantErr   error
	}{
		{name: "stream", args: []string{"get", "--discard", "http://" + addr + "/bytes/30000000"}, wantBytes: 30_000_000},
		{name: "flag after url", args: []string{"get", "http://" + addr + "/bytes/12345", "--discard", "--timeout", "10s"}, wantBytes: 12345},
		{name: "empty body", args: []string{"get", "--discard", "http://" + addr + "/bytes/0"}, wantBytes: 0},
		{name: "echo body counted", args: []string{"get", "--discard", "http://" + addr + "/"}, wantBytes: int64(len("echo-aws-2 meta aws-2\n"))},
		{name: "400 counted and fails", args: []string{"get", "--discard", "http://" + addr + "/bytes/x"}, wantBytes: int64(len(badN)), wantErr: ErrStatus},
		{name: "discard takes no value", args: []string{"get", "--discard=maybe", "http://" + addr + "/bytes/1"}, wantBytes: -1, wantErr: ErrUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, &out, io.Discard)
			checkErr(t, err, tt.wantErr)
			if tt.wantBytes < 0 {
				return
			}
			m := transferLine.FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("stdout = %q, want one line matching %s", out.String(), transferLine)
			}
			n, _ := strconv.ParseInt(m[1], 10, 64)
			secs, _ := strconv.ParseFloat(m[2], 64)
			mbps, _ := strconv.ParseFloat(m[3], 64)
			if diff := cmp.Diff(tt.wantBytes, n); diff != "" {
				t.Errorf("bytes (-want +got):\n%s", diff)
			}
			if secs <= 0 {
				t.Errorf("seconds = %v, want > 0", secs)
			}
			// mbps is printed from the unrounded seconds: allow rounding.
			if want := float64(n) * 8 / secs / 1e6; n > 1_000_000 && (mbps < want*0.99 || mbps > want*1.01) {
				t.Errorf("mbps = %v, want %v (bytes*8/seconds/1e6)", mbps, want)
			}
		})
	}
}
