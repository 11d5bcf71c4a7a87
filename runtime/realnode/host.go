package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The host side of a node: the veth's host end with the route to the pods, the NAT rule that
// turns the node's connections to HostIP:APIServerPort into connections to the loopback API
// server, and the pods' cgroup. Each step is undone by CleanupHost, which is also safe on a host
// where nothing (or only part) was set up.

// command runs one host command and returns its error with its output.
func command(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// natTableMarker records that the host had no iptables nat table before the node, so cleanup
// may remove the empty one iptables-nft leaves behind.
func (c *Config) natTableMarker() string { return c.path("host-had-no-nat-table") }

// setupHost moves the veth's node end into the network namespace of pid and configures the
// host end.
func (c *Config) setupHost(ctx context.Context, pid int) error {
	n := c.Network
	port := strconv.Itoa(c.APIServerPort)
	if nftBackend(ctx) {
		if exec.CommandContext(ctx, "nft", "list", "table", "ip", "nat").Run() != nil {
			if err := os.WriteFile(c.natTableMarker(), nil, 0o644); err != nil {
				return err
			}
		}
	}
	steps := [][]string{
		{"ip", "link", "add", n.HostIf, "type", "veth", "peer", "name", n.NodeIf, "netns", strconv.Itoa(pid)},
		{"ip", "addr", "add", n.HostIP + "/" + strconv.Itoa(linkPrefix), "dev", n.HostIf},
		{"ip", "link", "set", n.HostIf, "up"},
		// The API server reaches pods (webhooks, the aggregator) and the kubelet (logs, exec,
		// port-forward) through the node.
		{"ip", "route", "add", n.PodCIDR, "via", n.NodeIP, "dev", n.HostIf},
		{"iptables", "-w", "-t", "nat", "-N", n.Chain},
		{"iptables", "-w", "-t", "nat", "-A", n.Chain, "-i", n.HostIf, "-d", n.HostIP + "/32", "-p", "tcp", "--dport", port,
			"-j", "DNAT", "--to-destination", "127.0.0.1:" + port},
		{"iptables", "-w", "-t", "nat", "-I", "PREROUTING", "1", "-j", n.Chain},
	}
	for _, s := range steps {
		if err := command(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("host network of node %s: %w", c.Name, err)
		}
	}
	// Without route_localnet the kernel drops a packet arriving on the veth that was DNATed to
	// 127.0.0.1; it is set on this interface only.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+n.HostIf+"/route_localnet", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("host network of node %s: route_localnet: %w", c.Name, err)
	}
	return nil
}

// CleanupHost removes what setupHost and the cgroup set-up left on the host: the NAT chain and
// its jump, the veth (gone with the node's namespace unless something still holds it), the
// connection-tracking entries of the node's addresses and the pods' cgroups. It reports what it
// could not remove.
func CleanupHost(ctx context.Context, c *Config) error {
	n := c.Network
	var errs []error
	for exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-D", "PREROUTING", "-j", n.Chain).Run() == nil {
	}
	if exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-L", n.Chain, "-n").Run() == nil {
		for _, args := range [][]string{{"-F", n.Chain}, {"-X", n.Chain}} {
			if err := command(ctx, "iptables", append([]string{"-w", "-t", "nat"}, args...)...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := os.Stat(c.natTableMarker()); err == nil {
		// Best effort: another program may have put rules there meanwhile (then it stays).
		if natTableEmpty(ctx) {
			_ = exec.CommandContext(ctx, "nft", "delete", "table", "ip", "nat").Run()
		}
		_ = os.Remove(c.natTableMarker())
	}
	if _, err := os.Stat("/sys/class/net/" + n.HostIf); err == nil {
		if err := command(ctx, "ip", "link", "del", n.HostIf); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := exec.LookPath("conntrack"); err == nil {
		for _, flag := range []string{"-s", "-d"} {
			_ = exec.CommandContext(ctx, "conntrack", "-D", flag, n.HostIP).Run() // exits 1 when there is nothing to delete
		}
	}
	// The cgroup is the node's: a process still in it is a pod's that outlived its node.
	if err := killCgroups(c.CgroupRoot, 5*time.Second); err != nil {
		errs = append(errs, err)
	} else if err := removeCgroups(c.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// nftBackend reports whether iptables is iptables-nft with the nft command beside it: then the
// first iptables rule of the nat table creates an nftables table that outlives its rules.
func nftBackend(ctx context.Context) bool {
	if _, err := exec.LookPath("nft"); err != nil {
		return false
	}
	out, err := exec.CommandContext(ctx, "iptables", "-V").Output()
	return err == nil && bytes.Contains(out, []byte("nf_tables"))
}

// natTableEmpty reports whether the host's ip nat table holds no rule (only its base chains).
func natTableEmpty(ctx context.Context) bool {
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S").Output()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(line, "-P ") {
			return false
		}
	}
	return true
}

const cgroupFS = "/sys/fs/cgroup"

// cgroupHierarchies lists the directories the node's cgroup goes into: every v1 hierarchy (the
// kubelet checks that its cgroup root exists in each, name=systemd's too), or the unified one.
func cgroupHierarchies() ([]string, error) {
	if _, err := os.Stat(filepath.Join(cgroupFS, "cgroup.controllers")); err == nil {
		return []string{cgroupFS}, nil
	}
	entries, err := os.ReadDir(cgroupFS)
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	var out []string
	for _, e := range entries {
		// The hybrid layout's cgroup2 mount holds no v1 controller.
		if !e.IsDir() || e.Name() == "unified" {
			continue
		}
		dir := filepath.Join(cgroupFS, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue // a symlink such as cpu -> cpu,cpuacct, or not a hierarchy
		}
		out = append(out, dir)
	}
	return out, nil
}

// makeCgroups creates the node's cgroup root in every hierarchy; a new cpuset cgroup gets its
// parent's CPUs and memory nodes, without which no process may join it.
func makeCgroups(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	if len(hs) == 1 && hs[0] == cgroupFS {
		if err := enableControllers(); err != nil {
			return err
		}
	}
	for _, h := range hs {
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("cgroup %s/%s: %w", dir, f, err)
			}
		}
	}
	return nil
}

// kubeletControllers are the cgroup v2 controllers the kubelet requires in its cgroup root.
var kubeletControllers = []string{"cpu", "cpuset", "memory", "pids"}

// enableControllers makes the controllers the kubelet needs available to the node's cgroup on a
// unified (v2) hierarchy, where a child has only what its parent's subtree_control enables.
func enableControllers() error {
	have, err := os.ReadFile(filepath.Join(cgroupFS, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	var enable []string
	for _, c := range kubeletControllers {
		if !slices.Contains(strings.Fields(string(have)), c) {
			return fmt.Errorf("cgroup v2 controller %s is not available in %s (the kubelet needs %v)", c, cgroupFS, kubeletControllers)
		}
		enable = append(enable, "+"+c)
	}
	// EBUSY here is a root cgroup that holds processes (a container's cgroup namespace).
	if err := os.WriteFile(filepath.Join(cgroupFS, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
		return fmt.Errorf("enable the cgroup v2 controllers %v for the node's pods: %w", kubeletControllers, err)
	}
	return nil
}

// cgroupPIDs lists the processes in root's subtree of every hierarchy.
func cgroupPIDs(root string) []int {
	hs, _ := cgroupHierarchies()
	seen := map[int]bool{}
	var out []int
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	slices.Sort(out)
	return out
}

// killCgroups kills every process in root's subtree until none is left or the deadline passes.
func killCgroups(root string, deadline time.Duration) error {
	end := time.Now().Add(deadline)
	for {
		pids := cgroupPIDs(root)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("processes left in cgroup %s: %v", root, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroups removes root's subtree in every hierarchy, deepest first.
func removeCgroups(root string) error {
	if root == "" || strings.Contains(root, "..") {
		return fmt.Errorf("cgroup root %q", root)
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// withoutIt says how to go on without a real node.
const withoutIt = "; the local cluster runs without one (leave out --real-node): its KWOK nodes need no privileges"

// CheckRoot fails unless this process runs as root, which a node needs for its namespaces, the
// veth, the NAT rule and the cgroups.
func CheckRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("a real node needs root (uid %d): it creates mount and network namespaces, a veth, an iptables NAT chain and cgroups%s", os.Geteuid(), withoutIt)
	}
	return nil
}

// CheckNamespaces fails unless this process may create the mount and network namespaces a node
// runs in (a container without CAP_SYS_ADMIN and CAP_NET_ADMIN may not).
func CheckNamespaces(ctx context.Context) error {
	if out, err := exec.CommandContext(ctx, "unshare", "--mount", "--net", "true").CombinedOutput(); err != nil {
		return fmt.Errorf("a real node needs new mount and network namespaces, and `unshare --mount --net true` failed (%v: %s): run as root with CAP_SYS_ADMIN and CAP_NET_ADMIN%s",
			err, bytes.TrimSpace(out), withoutIt)
	}
	return nil
}
