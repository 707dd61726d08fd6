//go:build linux

package wireguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/kilofed/kilofed/mesh/link"
)

// userspace is a wireguard-go device running in this process, with its TUN
// link and its control socket.
type userspace struct {
	dev    *device.Device
	bounds *bounds // nil when unbounded
	// memTracked says that opening it set the memory limit that follows
	// the memory held (defaultTracker), which closing it releases.
	memTracked bool
	uapi       net.Listener
	done       chan struct{}
	log        *slog.Logger
	closed     chan struct{}
}

// openUserspace creates the TUN link opts.Name, starts wireguard-go on it
// and serves the control socket so that wgctrl finds the device.
func openUserspace(opts OpenOptions, log *slog.Logger) (*userspace, error) {
	mtu := opts.MTU
	if mtu == 0 {
		mtu = device.DefaultMTU
	}
	var tdev tun.Device
	err := link.RunInNetNS(opts.NetNS, func() error {
		if l, err := netlink.LinkByName(opts.Name); err == nil {
			return fmt.Errorf("%w: link %s already exists (type %s); another agent may own it: stop it or delete the link (ip link del %s)",
				ErrLinkBusy, opts.Name, l.Type(), opts.Name)
		}
		t, err := tun.CreateTUN(opts.Name, mtu)
		if err != nil {
			return fmt.Errorf("create TUN device %s: %w", opts.Name, err)
		}
		tdev = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	bind := conn.NewDefaultBind()
	if opts.NetNS != "" {
		// wireguard-go opens its UDP sockets and reads the MTU from
		// whatever goroutine needs them; pin both to the namespace.
		tdev = nsTUN{Device: tdev, netns: opts.NetNS}
		bind = nsBind{Bind: bind, netns: opts.NetNS}
	}
	u := &userspace{
		done:   make(chan struct{}),
		closed: make(chan struct{}),
		log:    log,
	}
	if n := inFlightOf(opts); n > 0 {
		u.bounds = newBounds(n, inFlightStall)
		tdev = boundedTUN{Device: tdev, b: u.bounds}
		bind = boundedBind{Bind: bind, b: u.bounds}
	}
	u.dev = device.NewDevice(tdev, bind, deviceLogger(log))
	f, err := ipc.UAPIOpen(opts.Name)
	if err != nil {
		u.dev.Close()
		return nil, fmt.Errorf("open control socket for %s: %w", opts.Name, err)
	}
	defer f.Close()
	u.uapi, err = ipc.UAPIListen(opts.Name, f)
	if err != nil {
		u.dev.Close()
		return nil, fmt.Errorf("listen on control socket for %s: %w", opts.Name, err)
	}
	u.memTracked = applyMemoryLimit(opts, log)
	go u.serve()
	return u, nil
}

// serve hands each control connection to the device.
func (u *userspace) serve() {
	defer close(u.done)
	for {
		c, err := u.uapi.Accept()
		if err != nil {
			select {
			case <-u.closed:
			default:
				u.log.Error("WireGuard control socket stopped; the device can no longer be configured", "err", err)
			}
			return
		}
		go u.dev.IpcHandle(c)
	}
}

// close removes the control socket and shuts the device down, which
// deletes its TUN link.
func (u *userspace) close() error {
	close(u.closed)
	err := u.uapi.Close()
	if errors.Is(err, os.ErrClosed) {
		// wireguard-go's listener cancels its watcher of the socket file
		// through a pipe that the watcher closes when it ends first: the
		// listener is closed all the same.
		err = nil
	}
	<-u.done
	u.dev.Close()
	if u.memTracked {
		defaultTracker.release()
	}
	return err
}

// nsTUN reads the TUN link's MTU inside its namespace: wireguard-go looks
// the link up by name on whatever thread handles the event.
type nsTUN struct {
	tun.Device
	netns string
}

func (t nsTUN) MTU() (mtu int, err error) {
	err = link.RunInNetNS(t.netns, func() error {
		var e error
		mtu, e = t.Device.MTU()
		return e
	})
	return mtu, err
}

// nsBind opens wireguard-go's UDP sockets inside a namespace. Without the
// concrete *conn.StdNetBind type wireguard-go skips its sticky-socket route
// listener, which would otherwise watch the wrong namespace.
type nsBind struct {
	conn.Bind
	netns string
}

func (b nsBind) Open(port uint16) (fns []conn.ReceiveFunc, actual uint16, err error) {
	err = link.RunInNetNS(b.netns, func() error {
		var e error
		fns, actual, e = b.Bind.Open(port)
		return e
	})
	return fns, actual, err
}

// deviceLogger adapts wireguard-go's printf logger to slog: its verbose
// lines at debug level, its errors as warnings (a peer without endpoint
// yet is routine).
func deviceLogger(log *slog.Logger) *device.Logger {
	return &device.Logger{
		Verbosef: func(format string, args ...any) {
			if log.Enabled(context.Background(), slog.LevelDebug) {
				log.Debug(fmt.Sprintf(format, args...), "source", "wireguard-go")
			}
		},
		Errorf: func(format string, args ...any) {
			log.Warn(fmt.Sprintf(format, args...), "source", "wireguard-go")
		},
	}
}
