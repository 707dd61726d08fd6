package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestTroubleshootingConditionsAreTheControllers checks each row of
// troubleshooting.md's RemoteCluster table against the conditions that
// federation/controller sets (setCondition and reasonOf in link.go), and
// that the table names every one of them.
func TestTroubleshootingConditionsAreTheControllers(t *testing.T) {
	src, err := os.ReadFile("../federation/controller/link.go")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, m := range regexp.MustCompile(`setCondition\(st, fedv1\.(\w+), (true|false), "(\w+)"`).FindAllStringSubmatch(string(src), -1) {
		set[m[1]+" "+map[string]string{"true": "True", "false": "False"}[m[2]]+" "+m[3]] = true
	}
	// reasonOf's reasons, set as CredentialsValid False.
	body := string(src)[strings.Index(string(src), "func reasonOf"):]
	for _, m := range regexp.MustCompile(`return "(\w+)"`).FindAllStringSubmatch(body[:strings.Index(body, "\n}\n")], -1) {
		set["CredentialsValid False "+m[1]] = true
	}
	if len(set) < 10 {
		t.Fatalf("read only %d conditions from link.go: %v", len(set), set)
	}
	page, err := os.ReadFile("troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\| `(True|False)` \\| `(\\w+)` \\|").FindAllStringSubmatch(string(page), -1) {
		k := m[1] + " " + m[2] + " " + m[3]
		seen[k] = true
		if !set[k] {
			t.Errorf("troubleshooting.md names %q, which federation/controller never sets", k)
		}
	}
	for k := range set {
		if !seen[k] {
			t.Errorf("troubleshooting.md does not name the condition %q that federation/controller sets", k)
		}
	}
}
