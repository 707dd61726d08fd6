package chart

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValuesReadsDocCommentsAndRefusesUndocumentedLeaves(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []Value
		err        string
	}{
		{name: "nested and documented map", yaml: "a:\n  # -- the b\n  # on two lines\n  b: 1\n  # -- c's map\n  c: {}\n# -- d\nd: [x]\n",
			want: []Value{{Key: "a.b", Default: "1", Doc: "the b on two lines"}, {Key: "a.c", Default: "{}", Doc: "c's map"}, {Key: "d", Default: `["x"]`, Doc: "d"}}},
		{name: "comment before the marker is dropped", yaml: "# section\n#\n# -- e\ne: \"\"\n", want: []Value{{Key: "e", Default: `""`, Doc: "e"}}},
		{name: "undocumented leaf", yaml: "a:\n  b: 1\n", err: "a.b has no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Values([]byte(tt.yaml))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}
