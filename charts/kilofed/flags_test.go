package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// flagDef matches a flag definition of cmd/kg and cmd/kilofed-controller:
// fs.StringVar(&o.x, "name", ...).
var flagDef = regexp.MustCompile(`fs\.\w+\(&o\.\w+, "([a-z0-9-]+)"`)

// definedFlags returns the flags defined in the Go files of a command.
func definedFlags(t *testing.T, cmd string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "cmd", cmd, "*.go"))
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagDef.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
	}
	if len(out) == 0 {
		t.Fatalf("no flags found in cmd/%s", cmd)
	}
	return out
}

func TestEveryRenderedFlagExistsInItsCommand(t *testing.T) {
	kgFlags, ctlFlags := definedFlags(t, "kg"), definedFlags(t, "kilofed-controller")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			o := Options{Namespace: v.namespace, Values: v.values}
			_, c := kg(t, o)
			check(t, "kg", c.Args, kgFlags)
			if r := renderObjects(t, o); len(r.ofKind("Deployment")) > 0 {
				_, c := controllerDeployment(t, o)
				check(t, "kilofed-controller", c.Args, ctlFlags)
			}
		})
	}
}

func check(t *testing.T, cmd string, args []string, defined map[string]bool) {
	t.Helper()
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !defined[name] {
			t.Errorf("%s has no flag %s (cmd/%s)", cmd, a, cmd)
		}
	}
}
