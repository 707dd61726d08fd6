package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Result is one result line of `go test -bench`: a benchmark, its
// iterations and its metrics by unit (ns/op, allocs/op, and whatever
// b.ReportMetric added, such as s/restored or min:kilofed-1-Mbps).
type Result struct {
	Package    string
	Name       string // without the -GOMAXPROCS suffix
	Iterations int64
	Metrics    map[string]float64
}

// Failure is a benchmark (or a whole package run) that printed FAIL.
type Failure struct {
	Package string
	Name    string // empty when only the package line failed
}

var (
	// resultLine is "BenchmarkName-2   	      10	  123 ns/op	  4.5 s/x".
	resultLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.+)$`)
	failLine   = regexp.MustCompile(`^\s*--- FAIL: (Benchmark\S+)`)
	pkgFail    = regexp.MustCompile(`^FAIL\s+(\S+)`)
	pkgLine    = regexp.MustCompile(`^pkg: (\S+)`)
)

// Parse reads the output of `go test -bench` (several packages may follow
// each other; pkg lines name them, pkg names the first when none does) and
// returns its result lines and failures.
func Parse(r io.Reader, pkg string) ([]Result, []Failure) {
	var results []Result
	var failures []Failure
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if m := pkgLine.FindStringSubmatch(line); m != nil {
			pkg = m[1]
			continue
		}
		if m := failLine.FindStringSubmatch(line); m != nil {
			failures = append(failures, Failure{Package: pkg, Name: m[1]})
			continue
		}
		if m := pkgFail.FindStringSubmatch(line); m != nil {
			failures = append(failures, Failure{Package: m[1]})
			continue
		}
		m := resultLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			continue
		}
		f := strings.Fields(m[3])
		if len(f)%2 != 0 {
			continue
		}
		res := Result{Package: pkg, Name: m[1], Iterations: n, Metrics: map[string]float64{}}
		for i := 0; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				res.Metrics = nil
				break
			}
			res.Metrics[f[i+1]] = v
		}
		if res.Metrics != nil {
			results = append(results, res)
		}
	}
	return results, failures
}
