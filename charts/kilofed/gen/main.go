// Command gen writes the generated files of the chart: the copies of the
// CRDs and of the mesh's admission policy, and the values table of
// README.md. Run it through go generate ./charts/kilofed.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	chart "github.com/kilofed/kilofed/charts/kilofed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "charts/kilofed/gen:", err)
		os.Exit(1)
	}
}

// run works in the chart's folder, where go generate starts it.
func run() error {
	root := filepath.Join("..", "..")
	copies, err := chart.Copies(root)
	if err != nil {
		return err
	}
	stale, _ := filepath.Glob("crds/*.yaml")
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for _, c := range copies {
		b, err := os.ReadFile(filepath.Join(root, c.Source))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(c.Chart), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(c.Chart, b, 0o644); err != nil {
			return err
		}
	}
	values, err := os.ReadFile("values.yaml")
	if err != nil {
		return err
	}
	table, err := chart.ValuesTable(values)
	if err != nil {
		return err
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		return err
	}
	out, err := chart.WithTable(string(readme), table)
	if err != nil {
		return err
	}
	return os.WriteFile("README.md", []byte(out), 0o644)
}
