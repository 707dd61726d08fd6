package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Package is a Go package that holds benchmarks.
type Package struct {
	Module string   // folder of its go.mod, relative to the repository
	Dir    string   // its folder, relative to Module ("." for the module's root)
	Lab    bool     // under e2e/: needs the lab (root, namespaces, a lab lock)
	Names  []string // its top-level benchmarks, sorted
}

// Path returns the package's folder relative to the repository.
func (p Package) Path() string { return filepath.Join(p.Module, p.Dir) }

var benchFunc = regexp.MustCompile(`(?m)^func (Benchmark\w*)\(\w+ \*testing\.B\)`)

// Discover lists the packages of the repository at root that declare
// benchmarks in their _test.go files (test files for another OS than
// Linux are skipped), sorted by path.
func Discover(root string) ([]Package, error) {
	byDir := map[string]*Package{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") || otherOS(name) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		names := benchFunc.FindAllStringSubmatch(string(src), -1)
		if len(names) == 0 {
			return nil
		}
		dir := filepath.Dir(path)
		p := byDir[dir]
		if p == nil {
			mod := moduleDir(root, dir)
			rel, _ := filepath.Rel(mod, dir)
			modRel, _ := filepath.Rel(root, mod)
			relRoot, _ := filepath.Rel(root, dir)
			p = &Package{Module: modRel, Dir: rel, Lab: relRoot == "e2e" || strings.HasPrefix(relRoot, "e2e"+string(filepath.Separator))}
			byDir[dir] = p
		}
		for _, m := range names {
			p.Names = append(p.Names, m[1])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Package
	for _, p := range byDir {
		slices.Sort(p.Names)
		p.Names = slices.Compact(p.Names)
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Package) int { return strings.Compare(a.Path(), b.Path()) })
	return out, nil
}

// otherOS reports whether a file name restricts it to an OS other than
// Linux (foo_windows_test.go).
func otherOS(name string) bool {
	base := strings.TrimSuffix(name, "_test.go")
	for _, goos := range []string{"windows", "darwin", "freebsd", "openbsd", "netbsd", "plan9", "solaris", "js", "wasip1", "other"} {
		if strings.HasSuffix(base, "_"+goos) {
			return true
		}
	}
	return false
}

// moduleDir returns the nearest folder from dir up to root that holds a go.mod.
func moduleDir(root, dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil || d == root || d == filepath.Dir(d) {
			return d
		}
	}
}
