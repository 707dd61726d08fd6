// Package golden compares what a test produced with a file under the test's
// testdata folder, and rewrites the file instead when the test runs with
// -update: the canonical-text habit of CONVENTIONS.md in one place.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the testdata golden files from the current output")

// Check compares got with testdata/name, or writes got there under -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	check(t, filepath.Join("testdata", name), got, *update)
}

// check compares got with the file at path, or writes it there when
// update is set; the flag stays out, so that the package's own tests do
// not depend on it.
func check(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
			return
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
		return
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); run go test -update if the change is right:\n%s", path, diff)
	}
}
