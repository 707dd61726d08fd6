package docs

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/kilofed/kilofed/dns/server"
	"github.com/kilofed/kilofed/federation/controller"
	"github.com/kilofed/kilofed/mesh/agent"
)

var update = flag.Bool("update", false, "rewrite the generated parts of the pages instead of comparing them")

// TestReferenceIsGeneratedFromTheCode checks that every generated section of
// reference.md is what the code gives today: the flags as the four binaries
// print them with --help, the annotation and label constants with their
// doc comments, the CRDs the chart installs, and the metrics the agent's and
// the controller's registries describe. go generate ./docs rewrites them.
func TestReferenceIsGeneratedFromTheCode(t *testing.T) {
	bins := buildBinaries(t)
	sections := map[string]string{}
	sections["flags-kg"] = goFlagTable(t, helpOf(t, bins, "kg", "--help"))
	sections["flags-kg-webhook"] = goFlagTable(t, helpOf(t, bins, "kg", "webhook", "--help"))
	sections["flags-kilofed-controller"] = goFlagTable(t, helpOf(t, bins, "kilofed-controller", "--help"))
	var cmds strings.Builder
	for _, c := range commandsOf(t, helpOf(t, bins, "kilofed", "--help")) {
		head, flags := splitHelp(t, helpOf(t, bins, "kilofed", "help", c))
		fmt.Fprintf(&cmds, "### kilofed %s\n\n```text\n%s\n```\n\n%s\n", c, head, pflagTable(t, flags))
	}
	sections["flags-kilofed"] = strings.TrimSuffix(cmds.String(), "\n")
	sections["kgctl"] = kgctlSection(t, bins)
	sections["annotations"] = annotationTable(t, "../mesh/k8s/annotations.go", "../federation/mirror/peers.go")
	sections["crds"] = crdTable(t, "../charts/kilofed/crds")
	sections["metrics-kg"] = metricTable(t, func(r prometheus.Registerer) {
		agent.NewMetrics(r)
		r.MustRegister(agent.NewDeviceCollector(nil, nil))
	}, "")
	sections["metrics-kilofed-controller"] = metricTable(t, func(r prometheus.Registerer) {
		controller.NewMetrics(r)
		server.NewMetrics(r, func() int { return 0 })
	}, "../cmd/kilofed-controller/main.go")
	checkPage(t, "reference.md", sections)
}

// checkPage compares (or, with -update, rewrites) the sections of page
// between <!-- BEGIN generated NAME --> and <!-- END generated NAME -->.
func checkPage(t *testing.T, page string, sections map[string]string) {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range sections {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		begin, end := "<!-- BEGIN generated "+name+" -->\n", "<!-- END generated "+name+" -->"
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Errorf("%s has no section %q (%s ... %s)", page, name, strings.TrimSpace(begin), end)
			continue
		}
		want := sections[name] + "\n"
		if got := doc[i+len(begin) : j]; got != want {
			if !*update {
				t.Errorf("%s: section %q is stale: run go generate ./docs\n--- in the page:\n%s\n--- from the code:\n%s", page, name, got, want)
			}
			doc = doc[:i+len(begin)] + want + doc[j:]
		}
	}
	if *update && doc != string(b) {
		if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/kg", "./cmd/kilofed-controller", "./cmd/kilofed", "./cmd/kgctl")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// helpOf runs a binary's help; machine-dependent defaults (the host name,
// the home directory) are replaced by what they stand for.
func helpOf(t *testing.T, bins, name string, args ...string) string {
	t.Helper()
	out, _ := exec.Command(filepath.Join(bins, name), args...).CombinedOutput() // help exits 0 or 2
	s := string(out)
	if host, err := os.Hostname(); err == nil && host != "" {
		s = regexp.MustCompile(`"`+regexp.QuoteMeta(host)+`_[0-9a-f-]{36}"`).ReplaceAllString(s, "the host name, _ and a random UUID")
		s = strings.ReplaceAll(s, `"`+host+`"`, "the host name")
		s = strings.ReplaceAll(s, `(default `+host+`)`, "(default the host name)")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		s = strings.ReplaceAll(s, home+"/", "~/")
	}
	if !strings.Contains(s, "-") {
		t.Fatalf("%s %s printed no flags:\n%s", name, strings.Join(args, " "), s)
	}
	return s
}

type flagRow struct{ flag, def, usage string }

var defaultRE = regexp.MustCompile(` \(default (.*)\)$`)

func splitDefault(usage string) (string, string) {
	if m := defaultRE.FindStringSubmatchIndex(usage); m != nil {
		return usage[:m[0]], usage[m[2]:m[3]]
	}
	return usage, ""
}

// goFlagTable reads the standard library's flag.PrintDefaults format.
func goFlagTable(t *testing.T, help string) string {
	t.Helper()
	var rows []flagRow
	head := regexp.MustCompile(`^  -([\w-]+)(?: (\S+))?$`)
	for _, line := range strings.Split(help, "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			f := "--" + m[1]
			if m[2] != "" {
				f += " " + m[2]
			}
			rows = append(rows, flagRow{flag: f})
		} else if strings.HasPrefix(line, "    \t") && len(rows) > 0 {
			r := &rows[len(rows)-1]
			r.usage = strings.TrimSpace(r.usage + " " + strings.TrimSpace(line))
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no flags in:\n%s", help)
	}
	for i := range rows {
		rows[i].usage, rows[i].def = splitDefault(rows[i].usage)
	}
	return renderFlags(rows)
}

// pflagTable reads the flags: part of a kilofed/kgctl command's help.
func pflagTable(t *testing.T, flags string) string {
	t.Helper()
	var rows []flagRow
	re := regexp.MustCompile(`^\s+(?:(-\w), )?(--[\w-]+)(?: (\S+))?\s{2,}(.*)$`)
	for _, line := range strings.Split(flags, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("flag line %q does not parse", line)
		}
		f := m[2]
		if m[3] != "" {
			f += " " + m[3]
		}
		if m[1] != "" {
			f = m[1] + ", " + f
		}
		r := flagRow{flag: f}
		r.usage, r.def = splitDefault(strings.TrimSpace(m[4]))
		rows = append(rows, r)
	}
	return renderFlags(rows)
}

func renderFlags(rows []flagRow) string {
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	for _, r := range rows {
		def := r.def
		if def != "" {
			def = code(def)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", code(r.flag), def, cell(r.usage))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func code(s string) string { return "`" + strings.ReplaceAll(s, "|", `\|`) + "`" }
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// commandsOf lists the commands of a kgctl.Main help.
func commandsOf(t *testing.T, help string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(help, "commands:\n")
	if !ok {
		t.Fatalf("no commands in:\n%s", help)
	}
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		out = append(out, strings.Fields(line)[0])
	}
	return out
}

// splitHelp cuts a command's help at its "flags:" line.
func splitHelp(t *testing.T, help string) (string, string) {
	t.Helper()
	head, flags, ok := strings.Cut(help, "\nflags:\n")
	if !ok {
		t.Fatalf("no flags: line in:\n%s", help)
	}
	return strings.TrimSpace(head), flags
}

// kgctlSection checks that each kgctl command is kilofed's (same help, the
// binary's name aside) and lists them.
func kgctlSection(t *testing.T, bins string) string {
	t.Helper()
	kilofed := commandsOf(t, helpOf(t, bins, "kilofed", "--help"))
	var names []string
	for _, c := range commandsOf(t, helpOf(t, bins, "kgctl", "--help")) {
		if !slices.Contains(kilofed, c) {
			t.Errorf("kgctl %s is not a kilofed command", c)
			continue
		}
		anon := strings.NewReplacer("kgctl", "CLI", "kilofed", "CLI").Replace
		k, f := anon(helpOf(t, bins, "kgctl", "help", c)), anon(helpOf(t, bins, "kilofed", "help", c))
		if k != f {
			t.Errorf("kgctl help %s differs from kilofed help %s:\n%s\n---\n%s", c, c, k, f)
		}
		names = append(names, "`"+c+"`")
	}
	return "`kgctl` runs " + strings.Join(names, ", ") +
		", with the same flags as the `kilofed` commands of that name (checked by this page's test)."
}

// annotationTable lists the string constants of the files whose value is an
// annotation or label key, with their doc comments.
func annotationTable(t *testing.T, files ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("| key | Go constant | meaning |\n|---|---|---|\n")
	for _, file := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if len(v.Values) != 1 {
					continue
				}
				lit, ok := v.Values[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				key, _ := strconv.Unquote(lit.Value)
				if !regexp.MustCompile(`^[a-z0-9.-]+\.[a-z]+/[a-z0-9-]+$`).MatchString(key) {
					continue
				}
				doc := strings.Join(strings.Fields(v.Doc.Text()), " ")
				name := v.Names[0].Name
				doc = strings.TrimPrefix(doc, name+" ")
				fmt.Fprintf(&b, "| `%s` | `%s.%s` | %s |\n", key, f.Name.Name, name, cell(doc))
			}
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// crdTable summarises every CRD of dir.
func crdTable(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	var b strings.Builder
	b.WriteString("| kind | API (storage version) | scope | short names | spec fields | kubectl get columns |\n|---|---|---|---|---|---|\n")
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var storage *apiextensionsv1.CustomResourceDefinitionVersion
		var versions []string
		for i, v := range crd.Spec.Versions {
			versions = append(versions, v.Name)
			if v.Storage {
				storage = &crd.Spec.Versions[i]
			}
		}
		if storage == nil {
			t.Fatalf("%s has no storage version", file)
		}
		var fields, cols []string
		if s := storage.Schema; s != nil && s.OpenAPIV3Schema != nil {
			if spec, ok := s.OpenAPIV3Schema.Properties["spec"]; ok {
				for k := range spec.Properties {
					fields = append(fields, "`"+k+"`")
				}
			}
		}
		slices.Sort(fields)
		for _, c := range storage.AdditionalPrinterColumns {
			cols = append(cols, c.Name)
		}
		api := crd.Spec.Group + "/" + storage.Name
		if len(versions) > 1 {
			api += " (served: " + strings.Join(versions, ", ") + ")"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s | %s |\n", crd.Spec.Names.Kind, api, crd.Spec.Scope,
			strings.Join(crd.Spec.Names.ShortNames, ", "), strings.Join(fields, ", "), strings.Join(cols, ", "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// descs is a Registerer that keeps what the collectors describe.
type descs struct{ list []*prometheus.Desc }

func (d *descs) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for x := range ch {
		d.list = append(d.list, x)
	}
	return nil
}

func (d *descs) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *descs) Unregister(prometheus.Collector) bool { return true }

var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "[^"]*", constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// metricTable lists the metrics that register describes, plus those a main
// package registers itself (NewGauge with Name and Help literals in mainFile).
func metricTable(t *testing.T, register func(prometheus.Registerer), mainFile string) string {
	t.Helper()
	d := &descs{}
	register(d)
	type row struct{ name, labels, help string }
	var rows []row
	for _, x := range d.list {
		m := descRE.FindStringSubmatch(x.String())
		if m == nil {
			t.Fatalf("cannot read %s", x)
		}
		name, _ := strconv.Unquote(m[1])
		help, _ := strconv.Unquote(m[2])
		rows = append(rows, row{name, m[3], help})
	}
	if mainFile != "" {
		src, err := os.ReadFile(mainFile)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`prometheus\.NewGauge\(prometheus\.GaugeOpts\{Name: ("[^"]+"),\s*Help: ("(?:[^"\\]|\\.)*")\}\)`)
		found := re.FindAllSubmatch(src, -1)
		if len(found) == 0 {
			t.Fatalf("%s registers no gauge that this test can read", mainFile)
		}
		for _, m := range found {
			name, _ := strconv.Unquote(string(m[1]))
			help, _ := strconv.Unquote(string(m[2]))
			rows = append(rows, row{name, "", help})
		}
	}
	var b strings.Builder
	b.WriteString("| metric | labels | meaning |\n|---|---|---|\n")
	for _, r := range rows {
		labels := ""
		if r.labels != "" {
			labels = "`" + strings.ReplaceAll(r.labels, ",", "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.name, labels, cell(r.help))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
