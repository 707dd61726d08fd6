package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pages are the docs this package owns and checks.
var pages = []string{"architecture.md", "comparison.md", "reference.md", "troubleshooting.md"}

// TestPagesNameTestsThatExist checks that every test or benchmark a page
// cites (`TestX`, `BenchmarkX`, `TestX/Subtest`) is defined in the
// repository: a top-level one as a func in a _test.go file, a subtest as a
// string literal of that file.
func TestPagesNameTestsThatExist(t *testing.T) {
	sources := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources[path] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`((?:Test|Benchmark)[A-Z]\\w*)(?:/(\\w+))?`")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cited.FindAllStringSubmatch(string(b), -1) {
			found := false
			for _, src := range sources {
				if strings.Contains(src, "func "+m[1]+"(") && (m[2] == "" || strings.Contains(src, `"`+m[2]+`"`)) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s cites %s, which no _test.go defines", page, m[0])
			}
		}
	}
}

// TestPagesLinkToFilesThatExist checks every relative link of the pages.
func TestPagesLinkToFilesThatExist(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "://") {
				continue
			}
			if _, err := os.Stat(m[1]); err != nil {
				t.Errorf("%s links to %s: %v", page, m[1], err)
			}
		}
	}
}

// TestReadmeLinksOnlyToFilesOfTheRepository: the README stands alone, its
// links are files of this repository that exist.
func TestReadmeLinksOnlyToFilesOfTheRepository(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)#]*)(#[^)]*)?\)`)
	for _, m := range link.FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], ":") {
			t.Errorf("README.md links outside the repository: %s", m[1])
			continue
		}
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("README.md links to %s: %v", m[1], err)
		}
	}
}
