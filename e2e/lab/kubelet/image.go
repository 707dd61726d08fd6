package kubelet

import (
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// imageConfig is the part of an image's configuration that decides what a
// container runs: Docker's ENTRYPOINT and CMD.
type imageConfig struct {
	Entrypoint, Cmd []string
	// Binary, when not empty, is the program of kilofed's own images: an
	// argv[0] of that name (or a path ending in it) runs the binary of
	// that name from Config.ImageBinDir.
	Binary string
}

// kilofedBinaries are kilofed's own images, by the last path element of the
// image's repository, each run as the binary of the same name.
var kilofedBinaries = []string{"kg", "kilofed-controller"}

// imageRepository returns the repository of an image reference without
// registry defaults, tag or digest, in lower case: "alpine/socat" for
// "docker.io/alpine/socat:1.7.4.4", "ghcr.io/kilofed/kg" for
// "ghcr.io/kilofed/kg:v1@sha256:...".
func imageRepository(image string) string {
	ref := strings.ToLower(image)
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	for _, p := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		ref = strings.TrimPrefix(ref, p)
	}
	return strings.TrimPrefix(ref, "library/")
}

// hostImage returns the configuration of an image whose container runs as
// a program of this host (the table is in doc.go): alpine/socat*,
// nicolaka/netshoot*, and kilofed's kg and kilofed-controller when binDir
// is set. ok is false for every other image.
func hostImage(image, binDir string) (imageConfig, bool) {
	repo := imageRepository(image)
	switch {
	case strings.HasPrefix(repo, "alpine/socat"):
		return imageConfig{Entrypoint: []string{"socat"}}, true
	case strings.HasPrefix(repo, "nicolaka/netshoot"):
		// The image's CMD is zsh; the host's POSIX shell stands in for it.
		return imageConfig{Cmd: []string{"sh"}}, true
	}
	if binDir == "" {
		return imageConfig{}, false
	}
	for _, b := range kilofedBinaries {
		if path.Base(repo) == b {
			return imageConfig{Entrypoint: []string{filepath.Join(binDir, b)}, Binary: b}, true
		}
	}
	return imageConfig{}, false
}

// containerArgv returns the argv of container c of an image configured as
// img, with Docker's rules (command replaces ENTRYPOINT, args replace CMD;
// when command is given the image's CMD is dropped too) and Kubernetes'
// $(VAR) expansion of command and args from env. A kilofed image's own
// binary, named by argv[0] (bare or as any path), is its Config.ImageBinDir
// copy.
func containerArgv(img imageConfig, c *corev1.Container, env map[string]string) []string {
	var argv []string
	switch {
	case len(c.Command) > 0:
		argv = append(argv, expandAll(c.Command, env)...)
		argv = append(argv, expandAll(c.Args, env)...)
	case len(c.Args) > 0:
		argv = append(argv, img.Entrypoint...)
		argv = append(argv, expandAll(c.Args, env)...)
	default:
		argv = append(append(argv, img.Entrypoint...), img.Cmd...)
	}
	if img.Binary != "" && len(argv) > 0 && path.Base(argv[0]) == img.Binary && len(img.Entrypoint) > 0 {
		argv[0] = img.Entrypoint[0]
	}
	return argv
}

// expandAll expands $(VAR) references in each of ss.
func expandAll(ss []string, env map[string]string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = expandVars(s, env)
	}
	return out
}

// expandVars expands s as Kubernetes expands command, args and env values:
// $(NAME) becomes the value of NAME when env defines it and stays as
// written otherwise, $$ is a literal $ (so $$(NAME) is the text $(NAME)),
// and any other $ is kept.
func expandVars(s string, env map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 { // unterminated: the rest is literal
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
