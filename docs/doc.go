// Package docs holds no code: its tests keep the pages of docs/ true to the
// code. reference.md's tables are generated from the binaries' --help
// output, the metric registries, the annotation constants and the CRDs
// (TestReferenceIsGeneratedFromTheCode), and architecture.svg is a render of
// architecture.dot (TestArchitectureSVGIsARenderOfItsDOT). Regenerate both
// with go generate ./docs (make docs).
package docs

//go:generate go test -count=1 -run ^(TestReferenceIsGeneratedFromTheCode|TestArchitectureSVGIsARenderOfItsDOT)$ . -update
