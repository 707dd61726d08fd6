package kubelet

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseLogOptions(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		want    logOptions
		wantErr string // substring; "" for no error
	}{
		{name: "none", query: "", want: logOptions{TailLines: -1}},
		{name: "kubectl logs -f --tail=50", query: "follow=true&tailLines=50&stream=All",
			want: logOptions{Follow: true, TailLines: 50}},
		{name: "previous and limit", query: "previous=true&limitBytes=10", want: logOptions{Previous: true, TailLines: -1, LimitBytes: 10}},
		{name: "tail zero", query: "tailLines=0", want: logOptions{TailLines: 0}},
		{name: "legacy tail", query: "tail=3", want: logOptions{TailLines: 3}},
		{name: "legacy tail all", query: "tail=all", want: logOptions{TailLines: -1}},
		{name: "tailLines wins over tail", query: "tail=3&tailLines=5", want: logOptions{TailLines: 5}},
		{name: "negative tail", query: "tailLines=-1", wantErr: `tailLines="-1" is not an integer >= 0`},
		{name: "zero limit", query: "limitBytes=0", wantErr: `limitBytes="0" is not an integer >= 1`},
		{name: "bad bool", query: "follow=yes", wantErr: `follow="yes" is not a boolean`},
		{name: "timestamps", query: "timestamps=true", wantErr: "drop --timestamps"},
		{name: "since seconds", query: "sinceSeconds=60", wantErr: "use --tail instead of --since"},
		{name: "since time", query: "sinceTime=2026-01-02T03:04:05Z", wantErr: "use --tail instead of --since"},
		{name: "stdout only", query: "stream=Stdout", wantErr: "drop --stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseLogOptions(q)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrLogOption) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want ErrLogOption with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunMarkerRoundTrip(t *testing.T) {
	m := runMarker(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), []string{"ip", "netns", "exec", "kfl-pod-x", "/lab", "workload", "sleep"})
	if !strings.HasSuffix(m, "\n") || !isRunMarker([]byte(strings.TrimSuffix(m, "\n"))) {
		t.Errorf("runMarker %q is not recognised by isRunMarker", m)
	}
	for _, line := range []string{"--- not a time start: [x]", "--- 2026-01-02T03:04:05Z begin: [x]", "-- 2026-01-02T03:04:05Z start: [x]",
		"--- 2026-01-02T03:04:05Z start: x"} {
		if isRunMarker([]byte(line)) {
			t.Errorf("isRunMarker(%q) = true, want false", line)
		}
	}
}

func TestSplitRuns(t *testing.T) {
	m1 := runMarker(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), []string{"a"})
	m2 := runMarker(time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC), []string{"a"})
	tests := []struct {
		name string
		data string
		want []string
	}{
		{name: "empty file", data: "", want: nil},
		{name: "one run", data: m1 + "hello\nworld\n", want: []string{"hello\nworld\n"}},
		{name: "run without output", data: m1, want: []string{""}},
		{name: "restart", data: m1 + "first\n" + m2 + "second\n", want: []string{"first\n", "second\n"}},
		{name: "restart, new run silent", data: m1 + "first\n" + m2, want: []string{"first\n", ""}},
		{name: "last line unfinished", data: m1 + "a\nb", want: []string{"a\nb"}},
		{name: "output before any marker", data: "stray\n" + m1 + "x\n", want: []string{"stray\n", "x\n"}},
		{name: "marker-like output inside a run", data: m1 + "--- hello start: [x]\n", want: []string{"--- hello start: [x]\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range splitRuns([]byte(tt.data)) {
				got = append(got, tt.data[r.Start:r.End])
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int64
		want string
	}{
		{name: "all", in: "a\nb\nc\n", n: -1, want: "a\nb\nc\n"},
		{name: "none", in: "a\nb\n", n: 0, want: ""},
		{name: "last two", in: "a\nb\nc\n", n: 2, want: "b\nc\n"},
		{name: "more than there are", in: "a\nb\n", n: 5, want: "a\nb\n"},
		{name: "exactly all", in: "a\nb\n", n: 2, want: "a\nb\n"},
		{name: "unfinished last line counts", in: "a\nb\nc", n: 2, want: "b\nc"},
		{name: "empty", in: "", n: 3, want: ""},
		{name: "blank lines count", in: "a\n\n\n", n: 2, want: "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tailLines([]byte(tt.in), tt.n)); got != tt.want {
				t.Errorf("tailLines(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

func TestLimitWriter(t *testing.T) {
	var b bytes.Buffer
	w := &limitWriter{w: &b, left: 5}
	if n, err := w.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("first write = %d, %v", n, err)
	}
	if n, err := w.Write([]byte("defg")); n != 2 || !errors.Is(err, errLogLimit) {
		t.Fatalf("second write = %d, %v; want 2, errLogLimit", n, err)
	}
	if n, err := w.Write([]byte("h")); n != 0 || !errors.Is(err, errLogLimit) {
		t.Fatalf("third write = %d, %v; want 0, errLogLimit", n, err)
	}
	if b.String() != "abcde" {
		t.Errorf("written %q, want abcde", b.String())
	}
	var all bytes.Buffer
	u := &limitWriter{w: &all, left: -1}
	_, _ = u.Write([]byte("unlimited"))
	if all.String() != "unlimited" {
		t.Errorf("unlimited writer wrote %q", all.String())
	}
}
