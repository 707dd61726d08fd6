// Command render writes the chart's plain manifests, for users without
// Helm: the default values, release kilofed in kube-system, CRDs first.
// make manifests runs it; the output (deploy/kilofed.yaml) is never edited
// by hand, and a test compares it with a fresh render.
package main

import (
	"flag"
	"fmt"
	"os"

	chart "github.com/kilofed/kilofed/charts/kilofed"
)

func main() {
	out := flag.String("o", "deploy/kilofed.yaml", "file to write; - is standard output")
	flag.Parse()
	b, err := chart.PlainManifests()
	if err == nil {
		if *out == "-" {
			_, err = os.Stdout.WriteString(b)
		} else {
			err = os.WriteFile(*out, []byte(b), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}
