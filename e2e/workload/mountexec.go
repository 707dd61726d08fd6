package workload

import (
	"fmt"
	"strings"
)

// bindMount is one --bind SRC:DST[:ro] of mount-exec.
type bindMount struct {
	Src, Dst string
	ReadOnly bool
}

// parseMountExec reads `mount-exec [--bind SRC:DST[:ro]]... -- ARGV...`.
func parseMountExec(args []string) ([]bindMount, []string, error) {
	var binds []bindMount
	for len(args) > 0 {
		switch a := args[0]; {
		case a == "--":
			if len(args) == 1 {
				return nil, nil, fmt.Errorf("%w: mount-exec: no command after --\n%s", ErrUsage, usage)
			}
			return binds, args[1:], nil
		case a == "--bind" && len(args) > 1:
			parts := strings.Split(args[1], ":")
			b := bindMount{}
			switch {
			case len(parts) == 2:
				b.Src, b.Dst = parts[0], parts[1]
			case len(parts) == 3 && parts[2] == "ro":
				b.Src, b.Dst, b.ReadOnly = parts[0], parts[1], true
			default:
				return nil, nil, fmt.Errorf("%w: mount-exec: --bind %q: want SRC:DST or SRC:DST:ro\n%s", ErrUsage, args[1], usage)
			}
			if !strings.HasPrefix(b.Src, "/") || !strings.HasPrefix(b.Dst, "/") {
				return nil, nil, fmt.Errorf("%w: mount-exec: --bind %q: paths must be absolute", ErrUsage, args[1])
			}
			binds = append(binds, b)
			args = args[2:]
		default:
			return nil, nil, fmt.Errorf("%w: mount-exec: unexpected %q (want --bind SRC:DST[:ro] or --)\n%s", ErrUsage, a, usage)
		}
	}
	return nil, nil, fmt.Errorf("%w: mount-exec: missing -- and command\n%s", ErrUsage, usage)
}
