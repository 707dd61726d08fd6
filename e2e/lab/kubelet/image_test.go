package kubelet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestImageRepository(t *testing.T) {
	for image, want := range map[string]string{
		"alpine/socat:1.7.4.4":              "alpine/socat",
		"docker.io/alpine/socat":            "alpine/socat",
		"nicolaka/netshoot:v0.15":           "nicolaka/netshoot",
		"ghcr.io/kilofed/kg:v0.1.0":         "ghcr.io/kilofed/kg",
		"localhost:5000/kg@sha256:abcd":     "localhost:5000/kg",
		"localhost:5000/Kilofed-Controller": "localhost:5000/kilofed-controller",
		"alpine":                            "alpine",
		"docker.io/library/busybox:1.36":    "busybox",
	} {
		if got := imageRepository(image); got != want {
			t.Errorf("imageRepository(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestHostImage(t *testing.T) {
	tests := []struct {
		image, binDir string
		want          imageConfig
		ok            bool
	}{
		{image: "alpine/socat:1.7.4.4", want: imageConfig{Entrypoint: []string{"socat"}}, ok: true},
		{image: "docker.io/alpine/socat", want: imageConfig{Entrypoint: []string{"socat"}}, ok: true},
		{image: "nicolaka/netshoot:v0.15", want: imageConfig{Cmd: []string{"sh"}}, ok: true},
		{image: "ghcr.io/kilofed/kg:v1", binDir: "/opt/kf/bin",
			want: imageConfig{Entrypoint: []string{"/opt/kf/bin/kg"}, Binary: "kg"}, ok: true},
		{image: "registry.example/team/kilofed-controller@sha256:00", binDir: "/b",
			want: imageConfig{Entrypoint: []string{"/b/kilofed-controller"}, Binary: "kilofed-controller"}, ok: true},
		{image: "ghcr.io/kilofed/kg:v1"},               // no ImageBinDir: built-in workload
		{image: "ghcr.io/kilofed/kgctl", binDir: "/b"}, // not an image kilofed installs
		{image: "alpine"},
		{image: "kilofed/http-echo"},
		{image: "busybox:1.36", binDir: "/b"},
	}
	for _, tt := range tests {
		got, ok := hostImage(tt.image, tt.binDir)
		if ok != tt.ok || !cmp.Equal(got, tt.want) {
			t.Errorf("hostImage(%q, %q) = %+v, %v; want %+v, %v", tt.image, tt.binDir, got, ok, tt.want, tt.ok)
		}
	}
}

func TestContainerArgvDockerSemantics(t *testing.T) {
	socat := imageConfig{Entrypoint: []string{"socat"}}
	netshoot := imageConfig{Cmd: []string{"sh"}}
	kg := imageConfig{Entrypoint: []string{"/bin/dir/kg"}, Binary: "kg"}
	withCmd := imageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"--default"}}
	env := map[string]string{"NODE_NAME": "node-a", "MY_POD_IPS": "10.0.0.2,fd00::2"}
	tests := []struct {
		name          string
		img           imageConfig
		command, args []string
		want          []string
	}{
		{name: "no command, no args: entrypoint and cmd", img: withCmd, want: []string{"/entry", "--default"}},
		{name: "args replace cmd", img: withCmd, args: []string{"--x"}, want: []string{"/entry", "--x"}},
		{name: "command replaces entrypoint and drops cmd", img: withCmd, command: []string{"/other"}, want: []string{"/other"}},
		{name: "command and args", img: withCmd, command: []string{"/other"}, args: []string{"a"}, want: []string{"/other", "a"}},
		{name: "socat args after the socat entrypoint", img: socat, args: []string{"TCP-LISTEN:42", "STDOUT"},
			want: []string{"socat", "TCP-LISTEN:42", "STDOUT"}},
		{name: "conformance socat: /bin/sh command", img: socat, command: []string{"/bin/sh"}, args: []string{"-c", "echo $MY_POD_IPS"},
			want: []string{"/bin/sh", "-c", "echo $MY_POD_IPS"}},
		{name: "netshoot default is sh", img: netshoot, want: []string{"sh"}},
		{name: "conformance netshoot: args only", img: netshoot, args: []string{"/bin/sh", "-ec", "while :; do echo '.'; sleep 5 ; done"},
			want: []string{"/bin/sh", "-ec", "while :; do echo '.'; sleep 5 ; done"}},
		{name: "kg args expanded", img: kg, args: []string{"--hostname=$(NODE_NAME)", "--x=$(UNSET)", "$$(NODE_NAME)"},
			want: []string{"/bin/dir/kg", "--hostname=node-a", "--x=$(UNSET)", "$(NODE_NAME)"}},
		{name: "kg by name as command", img: kg, command: []string{"/usr/local/bin/kg"}, args: []string{"--v"},
			want: []string{"/bin/dir/kg", "--v"}},
		{name: "command expanded", img: kg, command: []string{"sh", "-c", "echo $(MY_POD_IPS)"},
			want: []string{"sh", "-c", "echo 10.0.0.2,fd00::2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := containerArgv(tt.img, &corev1.Container{Command: tt.command, Args: tt.args}, env)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpandVars(t *testing.T) {
	env := map[string]string{"A": "x", "B": "y y", "EMPTY": ""}
	for in, want := range map[string]string{
		"plain":           "plain",
		"$(A)":            "x",
		"pre-$(A)-$(B)":   "pre-x-y y",
		"$(EMPTY)|":       "|",
		"$(MISSING)":      "$(MISSING)",
		"$$(A)":           "$(A)",
		"$$$(A)":          "$x",
		"$A $":            "$A $",
		"cost $5":         "cost $5",
		"$(A":             "$(A",
		"$()":             "$()",
		"$(A)$(A)":        "xx",
		"sh -c '$(B)'":    "sh -c 'y y'",
		"$(A)$$":          "x$",
		"unterminated $(": "unterminated $(",
	} {
		if got := expandVars(in, env); got != want {
			t.Errorf("expandVars(%q) = %q, want %q", in, got, want)
		}
	}
}
