// Package hostpkg checks that the host holds the programs a real kubelet node runs (containerd,
// runc, the CNI plugins, iptables and the like) and installs the missing ones with apt-get. A need
// is a file and the Debian package that ships it; Ensure installs packages only as root on a
// host with apt-get, and otherwise says which files are missing and which command installs them.
package hostpkg

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Need is one file the host must hold, an executable, and the Debian package that installs it.
type Need struct {
	Path    string
	Package string
	// Alt are other places the file may be (another distribution's, or another package's that
	// ships the same program): any one of them satisfies the need.
	Alt []string
}

// Paths of the container runtime's programs as Debian installs them (bookworm: containerd 1.6,
// runc 1.1, containernetworking-plugins 1.1).
const (
	Containerd = "/usr/bin/containerd"
	Ctr        = "/usr/bin/ctr"
	// Shim is the runc shim containerd starts per pod; containerd finds it on $PATH by name.
	Shim = "/usr/bin/containerd-shim-runc-v2"
	// Runc is the runc binary (Debian also links /usr/bin/runc to it; Docker's containerd.io
	// package ships /usr/bin/runc alone); the shim runs "runc" from $PATH.
	Runc = "/usr/sbin/runc"
	// CNIBinDir is where Debian puts the CNI plugins; upstream's default is /opt/cni/bin.
	CNIBinDir = "/usr/lib/cni"
)

// cniDirs are where distributions put the CNI plugins, Debian's first.
var cniDirs = []string{CNIBinDir, "/opt/cni/bin", "/usr/libexec/cni"}

// CNIDir is the first directory of cniDirs that holds the bridge plugin (CNIBinDir when none
// does: Ensure installs Debian's there).
func CNIDir() string {
	for _, d := range cniDirs {
		if executable(d + "/bridge") {
			return d
		}
	}
	return CNIBinDir
}

// cni is the need for CNI plugin name, in any of cniDirs.
func cni(name string) Need {
	n := Need{Path: CNIBinDir + "/" + name, Package: "containernetworking-plugins"}
	for _, d := range cniDirs[1:] {
		n.Alt = append(n.Alt, d+"/"+name)
	}
	return n
}

// RealNode is what a real node needs on the host: the container runtime, the CNI plugins its
// network config names, what kube-proxy runs (iptables-restore, conntrack) and the tools that
// set up the node's namespaces and network.
var RealNode = []Need{
	{Path: Containerd, Package: "containerd"},
	{Path: Ctr, Package: "containerd"},
	{Path: Shim, Package: "containerd"},
	{Path: Runc, Package: "runc", Alt: []string{"/usr/bin/runc"}},
	cni("bridge"),
	cni("host-local"),
	cni("loopback"),
	// The iptables package installs these as update-alternatives links (to the nft backend by
	// default), so dpkg lists none of them but they are there once it is configured.
	{Path: "/usr/sbin/iptables", Package: "iptables"},
	{Path: "/usr/sbin/iptables-save", Package: "iptables"},
	{Path: "/usr/sbin/iptables-restore", Package: "iptables"},
	{Path: "/usr/sbin/conntrack", Package: "conntrack"},
	// iproute2 ships /sbin/ip (and /bin/ip); on a merged /usr, /sbin/ip is /usr/sbin/ip.
	{Path: "/sbin/ip", Package: "iproute2", Alt: []string{"/usr/sbin/ip", "/bin/ip"}},
	{Path: "/usr/bin/nsenter", Package: "util-linux"},
	{Path: "/usr/bin/unshare", Package: "util-linux"},
}

// MissingError names the files a host lacks and the command that installs them.
type MissingError struct {
	Missing []Need
	// Reason says why Ensure did not install them itself (not root, no apt-get, or still missing
	// after apt-get ran).
	Reason string
}

func (e *MissingError) Error() string {
	files := make([]string, len(e.Missing))
	for i, n := range e.Missing {
		files[i] = n.Path + " (" + n.Package + ")"
	}
	return fmt.Sprintf("missing on this host: %s; %s: %s", strings.Join(files, ", "), e.Reason, InstallCommand(e.Missing))
}

// InstallCommand is the shell command that installs the packages of needs, as root.
func InstallCommand(needs []Need) string {
	return "apt-get update && apt-get install -y --no-install-recommends --no-remove " + strings.Join(packages(needs), " ")
}

// Missing returns the needs whose file is not an executable on this host, in their order.
func Missing(needs []Need) []Need {
	return defaultHost().missing(needs)
}

// Ensure installs the packages of the missing needs: when something is missing and this process
// is root on a host with apt-get, it runs apt-get update and apt-get install (non-interactive,
// output to out) and checks again. Otherwise, or if files are still missing after that, it returns
// a *MissingError naming them and the command to run. On a host run by systemd, Debian's
// containerd package also enables and starts its own containerd service (/run/containerd).
func Ensure(ctx context.Context, needs []Need, out io.Writer) error {
	return defaultHost().ensure(ctx, needs, out)
}

// host is what Ensure uses of the machine, replaced in tests.
type host struct {
	executable func(path string) bool
	uid        int
	aptGet     string // the apt-get command; empty: there is none
	// run runs name with args, output to out, with env added to the environment.
	run func(ctx context.Context, out io.Writer, env []string, name string, args ...string) error
}

func defaultHost() host {
	h := host{executable: executable, uid: os.Geteuid(), run: run}
	if p, err := exec.LookPath("apt-get"); err == nil {
		h.aptGet = p
	}
	return h
}

// executable reports whether path (followed through symlinks) is a regular file someone may run.
func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

func run(ctx context.Context, out io.Writer, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}

func (h host) missing(needs []Need) []Need {
	var out []Need
	for _, n := range needs {
		if !h.executable(n.Path) && !slices.ContainsFunc(n.Alt, h.executable) {
			out = append(out, n)
		}
	}
	return out
}

func (h host) ensure(ctx context.Context, needs []Need, out io.Writer) error {
	miss := h.missing(needs)
	switch {
	case len(miss) == 0:
		return nil
	case h.uid != 0:
		return &MissingError{Missing: miss, Reason: "install them as root"}
	case h.aptGet == "":
		return &MissingError{Missing: miss, Reason: "no apt-get here; on Debian, install them with"}
	}
	if out == nil {
		out = io.Discard
	}
	pkgs := packages(miss)
	fmt.Fprintf(out, "installing %s for %d missing files\n", strings.Join(pkgs, " "), len(miss))
	// Without a terminal, debconf would still ask (and wait) on a package that has questions.
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	if err := h.run(ctx, out, env, h.aptGet, "update"); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	// --no-remove: a package that conflicts with one installed (Debian's runc with Docker's
	// containerd.io) fails the install instead of removing what the host runs.
	install := slices.Concat([]string{"install", "-y", "--no-install-recommends", "--no-remove"}, pkgs)
	if err := h.run(ctx, out, env, h.aptGet, install...); err != nil {
		return fmt.Errorf("apt-get install %s: %w", strings.Join(pkgs, " "), err)
	}
	if still := h.missing(needs); len(still) > 0 {
		return &MissingError{Missing: still, Reason: "still missing after"}
	}
	return nil
}

// packages lists the packages of needs once each, sorted.
func packages(needs []Need) []string {
	var out []string
	for _, n := range needs {
		if !slices.Contains(out, n.Package) {
			out = append(out, n.Package)
		}
	}
	slices.Sort(out)
	return out
}
