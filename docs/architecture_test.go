package docs

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// TestArchitectureSVGIsARenderOfItsDOT renders architecture.dot with
// graphviz's dot and compares it with the committed architecture.svg
// (go generate ./docs rewrites it). Skipped without dot (hack/deps.sh
// installs graphviz).
func TestArchitectureSVGIsARenderOfItsDOT(t *testing.T) {
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("graphviz's dot is not installed (make deps)")
	}
	want, err := exec.Command("dot", "-Tsvg", "architecture.dot").Output()
	if err != nil {
		t.Fatalf("dot -Tsvg architecture.dot: %v", err)
	}
	got, err := os.ReadFile("architecture.svg")
	if err != nil && !*update {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	if *update {
		if err := os.WriteFile("architecture.svg", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Error("architecture.svg is not a render of architecture.dot with this machine's dot: run go generate ./docs")
}
