// Command bench runs every benchmark of the repository (the Go benchmarks
// of the root module and of mesh/, and the lab benchmarks under e2e/),
// parses what `go test -bench` prints (b.ReportMetric's units included),
// prints one markdown table (figure, kilofed, peer, ratio, spread) and
// writes it with the JSON of the run into bench/results/ (latest.md,
// latest.json). `make bench` runs it; `make bench-quick` (or
// `make bench QUICK=1`) runs only the cheap benchmarks, once each.
//
// Lab benchmarks run one at a time, each holding the lab lock (-lab-lock)
// only while it runs; their test binaries are built before. A benchmark
// that fails is listed in the table and the JSON, and bench exits 1 after
// writing them.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Run is what results/latest.json holds.
type Run struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Quick    bool      `json:"quick"`
	Complete bool      `json:"complete"` // every discovered benchmark ran and passed
	Commit   string    `json:"commit"`
	Go       string    `json:"go"`
	CPUs     int       `json:"cpus"`
	Kernel   string    `json:"kernel"`
	Count    int       `json:"count"`
	Skipped  []string  `json:"skipped,omitempty"` // lab benchmarks left out by -quick or -run
	Figures  []Figure  `json:"figures"`
	Failures []string  `json:"failures,omitempty"`
	Results  []Result  `json:"results"`
}

func main() {
	quick := flag.Bool("quick", false, "cheap benchmarks only, once each (a sanity check in a few minutes)")
	count := flag.Int("count", 5, "go test -count of the cheap benchmarks (1 with -quick); lab benchmarks run once")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime of the cheap benchmarks")
	out := flag.String("out", "bench/results", "folder of latest.json and latest.md")
	lock := flag.String("lab-lock", "/tmp/kilofed-lab.lock", "file locked (flock) while a lab benchmark runs; empty: none")
	run := flag.String("run", "", "only the benchmarks whose top-level name matches this regexp")
	timeout := flag.Duration("timeout", 30*time.Minute, "timeout of one go test run")
	flag.Parse()
	if *quick {
		*count = 1
	}
	if err := bench(options{quick: *quick, count: *count, benchtime: *benchtime, out: *out, lock: *lock, run: *run, timeout: *timeout}); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	quick     bool
	count     int
	benchtime string
	out       string
	lock      string
	run       string
	timeout   time.Duration
}

func bench(o options) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	filter, err := regexp.Compile(o.run)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	pkgs, err := Discover(root)
	if err != nil {
		return err
	}
	logs, err := os.MkdirTemp("", "kilofed-bench-")
	if err != nil {
		return err
	}
	r := Run{Started: time.Now().UTC(), Quick: o.quick, Count: o.count, Go: runtime.Version(), CPUs: runtime.NumCPU(),
		Commit: gitCommit(root), Kernel: kernel()}
	fmt.Printf("bench: logs in %s\n", logs)
	labPkgs := map[string]bool{}
	complete := o.run == "" && !o.quick
	for _, p := range pkgs {
		var names []string
		for _, n := range p.Names {
			if filter.MatchString(n) {
				names = append(names, n)
			}
		}
		if p.Lab && o.quick {
			for _, n := range names {
				r.Skipped = append(r.Skipped, p.Path()+"."+n)
			}
			continue
		}
		if len(names) == 0 {
			continue
		}
		if !p.Lab {
			var slow []string
			names, slow = splitOnce(names)
			for _, n := range slow {
				if o.quick {
					r.Skipped = append(r.Skipped, p.Path()+"."+n)
				}
			}
			if len(slow) > 0 && !o.quick {
				res, fails := runLab(root, logs, p, slow, o)
				for _, x := range res {
					labPkgs[x.Package+"."+benchRoot(x.Name)] = true
				}
				r.Results = append(r.Results, res...)
				r.Failures = append(r.Failures, fails...)
			}
			if len(names) == 0 {
				continue
			}
		}
		if p.Lab {
			res, fails := runLab(root, logs, p, names, o)
			for _, x := range res {
				labPkgs[x.Package] = true
			}
			r.Results = append(r.Results, res...)
			r.Failures = append(r.Failures, fails...)
		} else {
			res, fails := runCheap(root, logs, p, names, o)
			r.Results = append(r.Results, res...)
			r.Failures = append(r.Failures, fails...)
		}
	}
	r.Seconds = time.Since(r.Started).Seconds()
	r.Complete = complete && len(r.Failures) == 0
	r.Figures = Aggregate(r.Results, labPkgs)
	md := markdown(r)
	fmt.Print("\n" + md)
	dir := o.out
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Printf("bench: wrote %s and latest.md\n", filepath.Join(dir, "latest.json"))
	if len(r.Failures) > 0 {
		return fmt.Errorf("%d benchmark(s) failed: %s (logs in %s)", len(r.Failures), strings.Join(r.Failures, ", "), logs)
	}
	return nil
}

// markdown is latest.md: what ran, then the table.
func markdown(r Run) string {
	var b strings.Builder
	mode := "full run"
	if r.Quick {
		mode = "quick run (cheap benchmarks only, count 1)"
	}
	fmt.Fprintf(&b, "Benchmarks, %s, %s, %.0f s, commit %s, %s, %d CPUs, kernel %s; cheap benchmarks -count %d, lab benchmarks once. kilofed: median; spread: min-max over the runs (and the samples a lab benchmark takes itself).\n\n",
		mode, r.Started.Format("2006-01-02 15:04 UTC"), r.Seconds, r.Commit, r.Go, r.CPUs, r.Kernel, r.Count)
	b.WriteString(Table(r.Figures))
	if len(r.Failures) > 0 {
		fmt.Fprintf(&b, "\nFailed (no figure): %s\n", strings.Join(r.Failures, ", "))
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "\nNot run: %s\n", strings.Join(r.Skipped, ", "))
	}
	return b.String()
}

// once are the benchmarks outside e2e/ that take their own samples over
// minutes (real API servers, an external server and load generator): like
// the lab ones, they run once each (-benchtime 1x) under the lab lock, and
// --quick leaves them out.
var once = map[string]bool{
	"BenchmarkServicesyncScale":  true, // servicesync/scale_bench_test.go: three API servers, 100 and 1000 services
	"BenchmarkDNSAgainstCoreDNS": true, // dns/server/dnsperf_bench_test.go: dnsperf against kilofed and CoreDNS
	// mesh/agent/agentsim (docs/scale.md): simulated agents against a real
	// API server, 2 rounds of each size, each set up from scratch (~20 min).
	"BenchmarkAPILoad":                true,
	"BenchmarkAgentIn1000NodeCluster": true,
}

// splitOnce splits names into the cheap benchmarks and those of once.
func splitOnce(names []string) (cheap, slow []string) {
	for _, n := range names {
		if once[n] {
			slow = append(slow, n)
		} else {
			cheap = append(cheap, n)
		}
	}
	return cheap, slow
}

// runCheap runs the benchmarks of a package that needs no lab with go test.
func runCheap(root, logs string, p Package, names []string, o options) ([]Result, []string) {
	args := []string{"test", "-run", "^$", "-bench", anchored(names), "-benchmem", "-count", fmt.Sprint(o.count),
		"-benchtime", o.benchtime, "-timeout", o.timeout.String(), "./" + filepath.ToSlash(p.Dir)}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, p.Module)
	return runAndParse(cmd, logs, p, names, "go "+strings.Join(args, " "))
}

// runLab builds the test binary of a lab package, then runs each of its
// benchmarks once (-benchtime 1x), one at a time under the lab lock.
func runLab(root, logs string, p Package, names []string, o options) ([]Result, []string) {
	bin := filepath.Join(logs, strings.ReplaceAll(p.Path(), string(filepath.Separator), "-")+".test")
	build := exec.Command("go", "test", "-c", "-o", bin, "./"+filepath.ToSlash(p.Dir))
	build.Dir = filepath.Join(root, p.Module)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Printf("bench: build %s: %v\n%s", p.Path(), err, out)
		var fails []string
		for _, n := range names {
			fails = append(fails, p.Path()+"."+n)
		}
		return nil, fails
	}
	var results []Result
	var fails []string
	for _, n := range names {
		unlock, err := flock(o.lock)
		if err != nil {
			fails = append(fails, p.Path()+"."+n)
			fmt.Printf("bench: lab lock %s: %v\n", o.lock, err)
			continue
		}
		args := []string{"-test.run", "^$", "-test.bench", anchored([]string{n}), "-test.benchtime", "1x", "-test.count", "1", "-test.timeout", o.timeout.String()}
		cmd := exec.Command(bin, args...)
		cmd.Dir = filepath.Join(root, p.Path())
		cmd.Env = os.Environ()
		if os.Getenv("CI") == "" {
			cmd.Env = append(cmd.Env, "CI=true") // a lab that cannot start fails loudly
		}
		res, f := runAndParse(cmd, logs, p, []string{n}, p.Path()+".test "+strings.Join(args, " "))
		unlock()
		results = append(results, res...)
		fails = append(fails, f...)
	}
	return results, fails
}

// runAndParse runs cmd, keeps its output in logs, and returns its results
// and the benchmarks of names that failed or printed no result.
func runAndParse(cmd *exec.Cmd, logs string, p Package, names []string, what string) ([]Result, []string) {
	start := time.Now()
	fmt.Printf("bench: %s: %s\n", p.Path(), what)
	var out bytes.Buffer
	logName := filepath.Join(logs, strings.ReplaceAll(p.Path(), string(filepath.Separator), "-")+"-"+strings.Join(names, "+")+".log")
	f, err := os.Create(logName)
	if err != nil {
		return nil, qualified(p, names)
	}
	defer f.Close()
	cmd.Stdout = io.MultiWriter(&out, f)
	cmd.Stderr = f
	runErr := cmd.Run()
	results, failures := Parse(&out, importPath(p))
	var fails []string
	seen := map[string]bool{}
	for _, r := range results {
		seen[benchRoot(r.Name)] = true
	}
	failed := map[string]bool{}
	for _, x := range failures {
		if x.Name != "" {
			failed[benchRoot(x.Name)] = true
		}
	}
	for _, n := range names {
		if failed[n] || !seen[n] || (runErr != nil && len(names) == 1) {
			fails = append(fails, p.Path()+"."+n)
		}
	}
	status := "ok"
	if len(fails) > 0 {
		status = fmt.Sprintf("FAILED (%v), see %s", runErr, logName)
	}
	fmt.Printf("bench: %s: %s in %v\n", p.Path(), status, time.Since(start).Round(time.Second))
	return results, fails
}

func qualified(p Package, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, p.Path()+"."+n)
	}
	return out
}

// importPath is a default for results printed before any pkg: line.
func importPath(p Package) string {
	return "./" + filepath.ToSlash(p.Path())
}

func anchored(names []string) string {
	return "^(" + strings.Join(names, "|") + ")$"
}

// flock takes an exclusive lock of path (created if missing) and returns
// its release; with an empty path it does nothing.
func flock(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// repoRoot is the folder of the root go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if src, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.Contains(src, []byte("module github.com/kilofed/kilofed\n")) {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no go.mod of github.com/kilofed/kilofed above %s: run from the repository", dir)
		}
	}
}

func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "+dirty"
	}
	return c
}

func kernel() string {
	out, err := exec.Command("uname", "-r").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
