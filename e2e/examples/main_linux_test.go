//go:build linux

package examples

import (
	"fmt"
	"os"
	"testing"

	"github.com/kilofed/kilofed/e2e/lab"
)

// binDir holds kg, kgctl, kilofed and kilofed-controller (KILOFED_BIN, else
// built by TestMain).
var binDir string

func TestMain(m *testing.M) {
	dir, cleanup, err := lab.Commands("kg", "kgctl", "kilofed", "kilofed-controller")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/examples:", err)
		if os.Getenv("CI") == "true" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	binDir = dir
	code := m.Run()
	cleanup()
	os.Exit(code)
}
