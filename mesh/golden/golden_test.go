package golden

import "testing"

func TestCheckMatchesTheFile(t *testing.T) {
	Check(t, "example.golden", "kilo0: 10.5.0.1/16\n")
}

func TestCheckReportsADifference(t *testing.T) {
	rec := &recorder{TB: t}
	Check(rec, "example.golden", "kilo0: 10.5.0.2/16\n")
	if !rec.failed {
		t.Error("Check accepted output that differs from the golden file")
	}
}

type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Helper()               {}
