package golden

import (
	"os"
	"path/filepath"
	"testing"
)

const example = "kilo0: 10.5.0.1/16\n"

func TestCheckMatchesTheFile(t *testing.T) {
	Check(t, "example.golden", example) // under -update: rewrites the same text
}

// The tests below call check with update set or not, so that they test the
// same thing with and without -update and never rewrite testdata.

func TestCheckReportsADifference(t *testing.T) {
	rec := &recorder{TB: t}
	check(rec, filepath.Join("testdata", "example.golden"), "kilo0: 10.5.0.2/16\n", false)
	if !rec.failed {
		t.Error("check accepted output that differs from the golden file")
	}
}

func TestCheckReportsAMissingFile(t *testing.T) {
	rec := &recorder{TB: t}
	check(rec, filepath.Join(t.TempDir(), "missing.golden"), example, false)
	if !rec.failed {
		t.Error("check accepted a golden file that does not exist")
	}
}

func TestCheckUpdateWritesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", "out.golden")
	check(t, path, example, true)
	b, err := os.ReadFile(path)
	if err != nil || string(b) != example {
		t.Fatalf("after an update the file holds %q, %v; want %q", b, err, example)
	}
	rec := &recorder{TB: t}
	check(rec, path, example, false)
	if rec.failed {
		t.Error("the updated file does not match what was written")
	}
}

// recorder records failures instead of failing the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.failed = true }
func (r *recorder) Helper()               {}
