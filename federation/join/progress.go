package join

import (
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// progress prints join's steps: "==> step", indented details, and a final
// one-line verdict.
type progress struct{ w io.Writer }

func (p *progress) printf(format string, args ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, format, args...)
	}
}

func (p *progress) step(format string, args ...any) { p.printf("==> "+format+"\n", args...) }

func (p *progress) detail(format string, args ...any) { p.printf("    "+format+"\n", args...) }

func (p *progress) verdict(format string, args ...any) { p.printf(format+"\n", args...) }

func indent(s string) string {
	return "      " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n      ")
}

// redact returns obj with a Secret's data replaced, for printing.
func redact(obj client.Object) client.Object {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj
	}
	s = s.DeepCopy()
	for k := range s.Data {
		s.Data[k] = []byte("<redacted>")
	}
	return s
}
