package kgctl

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestGraphPictures(t *testing.T) {
	mesh, err := Compute(seedSnapshot(), MeshFlags{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("no graphviz", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		var out bytes.Buffer
		err := mesh.WriteGraph(t.Context(), &out, GraphOptions{Format: GraphSVG})
		if !errors.Is(err, ErrNoGraphviz) || !strings.Contains(err.Error(), "install graphviz, or use -o dot and pipe to dot") {
			t.Errorf("error %v, want ErrNoGraphviz with a fix", err)
		}
	})
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("graphviz is not installed")
	}
	for _, tt := range []struct{ name, format, magic string }{
		{name: "svg", format: GraphSVG, magic: "<svg"},
		{name: "png", format: GraphPNG, magic: "\x89PNG"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, NewFakeSource(seedSnapshot()), "graph", "-o", tt.format)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout[:min(len(stdout), 400)], tt.magic) {
				t.Errorf("output does not start like a %s: %q", tt.format, stdout[:min(len(stdout), 80)])
			}
			if tt.format == GraphSVG && !strings.Contains(stdout, "node&#45;beijing") && !strings.Contains(stdout, "node-beijing") {
				t.Errorf("the SVG does not show node-beijing")
			}
		})
	}
}
