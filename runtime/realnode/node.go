package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A node is this very executable started again (as the cluster's stand-ins are): the program
// that supervises a local cluster calls RunIfNode first thing, and started as a node it runs
// one instead of its usual work.
const (
	configEnv = "KUEUELAB_REAL_NODE"
	innerEnv  = "KUEUELAB_REAL_NODE_INNER"
	// Arg is argv[1] of a node's process: it names the process in ps, and with the config path
	// after it tells the nodes of different clusters apart.
	Arg = "kueuelab-real-node"
)

// Command is the command line and environment that run cfgPath's node with executable exe.
func Command(exe, cfgPath string) (argv, env []string) {
	return []string{exe, Arg, cfgPath}, []string{configEnv + "=" + cfgPath}
}

// RunIfNode runs the node this process was started as, until SIGTERM, and reports ran=true with
// the exit code; it returns ran=false at once in any other process.
func RunIfNode() (ran bool, code int) {
	path := os.Getenv(configEnv)
	if path == "" {
		return false, 0
	}
	cfg, err := ReadConfig(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return true, 2
	}
	if os.Getenv(innerEnv) != "" {
		if err := runInner(cfg); err != nil {
			fmt.Fprintf(os.Stderr, "node %s: %v\n", cfg.Name, err)
			return true, 1
		}
		return true, 0
	}
	// SIGQUIT too: the supervisor sends it to a node whose liveness probe failed, and the node
	// stops as it does for SIGTERM rather than dying with its host side in place.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "node %s: %v\n", cfg.Name, err)
		return true, 1
	}
	return true, 0
}

// Shutdown budget: the supervisor sends SIGKILL 15 s after SIGTERM.
const (
	stopKubelet    = 4 * time.Second
	stopPods       = 3 * time.Second
	stopContainerd = 3 * time.Second
	stopRest       = 2 * time.Second
	innerGrace     = stopKubelet + stopPods + stopContainerd + stopRest + time.Second
)

// Run is the node's outer process: it starts the node's init in new mount and network
// namespaces, wires the host to it, and waits; when ctx ends it stops the node and cleans the
// host. It returns when the node has stopped, with the node's error if it failed.
func Run(ctx context.Context, cfg *Config) error {
	start := time.Now()
	// A node that is still stopping (its init got SIGTERM when the last outer process died) holds
	// the lock until its last process is gone: this one waits rather than tear its network down
	// under it. The node's init inherits the lock and holds it for as long as it runs.
	lock, err := lockNode(ctx, cfg)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := os.WriteFile(cfg.startedFile(), []byte(start.Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		return err
	}
	if err := CleanupHost(context.Background(), cfg); err != nil {
		return fmt.Errorf("clean up after the last run: %w", err)
	}
	defer func() {
		if err := CleanupHost(context.Background(), cfg); err != nil {
			fmt.Fprintf(os.Stderr, "node %s: clean up the host: %v\n", cfg.Name, err)
		}
	}()
	if err := makeCgroups(cfg.CgroupRoot); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// Pdeathsig is sent when the thread that started the child exits: this goroutine keeps its
	// thread for as long as the node runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), innerEnv+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{r, lock}
	// The node's init is PID 1 of its own PID namespace, so when it ends every process of the
	// node ends with it, whatever it did not stop; it gets SIGTERM (and stops everything) if this
	// process dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID,
		Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		r.Close()
		return fmt.Errorf("start the node in its namespaces: %w", err)
	}
	r.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := cfg.setupHost(ctx, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return err
	}
	if _, err := w.Write([]byte("go\n")); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("tell the node its network is ready: %w", err)
	}
	w.Close()
	fmt.Printf("node %s: host network ready after %s (node %s, host %s, pods %s)\n", cfg.Name,
		time.Since(start).Round(time.Millisecond), cfg.Network.NodeIP, cfg.Network.HostIP, cfg.Network.PodCIDR)
	select {
	case err := <-done:
		if err == nil {
			err = errors.New("exit code 0")
		}
		return fmt.Errorf("the node stopped by itself: %w", err)
	case <-ctx.Done():
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(innerGrace):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("the node did not stop within %s: killed", innerGrace)
	}
}

// child is one of the node's long-running processes.
type child struct {
	name string
	cmd  *exec.Cmd
}

// runInner is the node's init, inside its own mount and network namespaces.
func runInner(cfg *Config) error {
	// Mounts made here stay here.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the node's mounts private: %w", err)
	}
	// PID 1 of the node's PID namespace inherits containerd's daemonized shims and every
	// container process whose shim is gone; its own /proc shows it the node's processes alone.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount the node's /proc: %w", err)
	}
	for _, v := range []string{configEnv, innerEnv} {
		_ = os.Unsetenv(v)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	ready := os.NewFile(3, "host-ready")
	line, err := io.ReadAll(io.LimitReader(ready, 3))
	ready.Close()
	if err != nil || strings.TrimSpace(string(line)) != "go" {
		return fmt.Errorf("the host did not set up the node's network (read %q: %v)", line, err)
	}
	if err := cfg.setupNodeNetwork(); err != nil {
		return err
	}
	if err := cfg.mountNodeFS(); err != nil {
		return err
	}
	for _, d := range []string{cfg.path("containerd", "state"), cfg.path("cni", "ipam"), cfg.path("kubelet", "root")} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("clear the last run's %s: %w", d, err)
		}
	}
	if err := cfg.writeFiles(); err != nil {
		return err
	}
	exits := make(chan reaped, 16)
	var children []child
	start := func(name string, argv []string) error {
		logf, err := os.OpenFile(cfg.logFile(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer logf.Close()
		fmt.Fprintf(logf, "\n--- %s kueuelab real node %s: %s\n", time.Now().Format(time.RFC3339), cfg.Name, strings.Join(argv, " "))
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Dir = cfg.Dir
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		children = append(children, child{name: name, cmd: cmd})
		return nil
	}
	t0 := time.Now()
	if err := start("containerd", cfg.containerdArgs()); err != nil {
		return err
	}
	err = cfg.awaitSocket(30 * time.Second)
	if err == nil {
		err = cfg.importImages()
	}
	if err != nil {
		stopAll(cfg, children, exits, false)
		return err
	}
	fmt.Printf("node %s: containerd up, %d images imported in %s\n", cfg.Name, len(cfg.Images), time.Since(t0).Round(time.Millisecond))
	// Every process this one runs from here on is reaped by one loop (os/exec's Wait would
	// race it for the same children); exits of the three components end the node.
	go reap(exits)
	if err := start("kubelet", cfg.kubeletArgs()); err != nil {
		stopAll(cfg, children, exits, true)
		return err
	}
	if err := start("kube-proxy", cfg.kubeProxyArgs()); err != nil {
		stopAll(cfg, children, exits, true)
		return err
	}
	fmt.Printf("node %s: kubelet and kube-proxy started\n", cfg.Name)
	for {
		select {
		case <-sigs:
			fmt.Printf("node %s: stopping\n", cfg.Name)
			stopAll(cfg, children, exits, true)
			return nil
		case r := <-exits:
			for _, c := range children {
				if c.cmd.Process.Pid == r.pid {
					stopAll(cfg, children, exits, true)
					return fmt.Errorf("%s exited (%s); see %s", c.name, r.status(), cfg.logFile(c.name))
				}
			}
		}
	}
}

// reaped is a child's exit.
type reaped struct {
	pid int
	ws  unix.WaitStatus
}

func (r reaped) status() string {
	switch {
	case r.ws.Exited():
		return "exit code " + strconv.Itoa(r.ws.ExitStatus())
	case r.ws.Signaled():
		return "signal " + r.ws.Signal().String()
	}
	return fmt.Sprintf("status %#x", uint32(r.ws))
}

// reap waits for every child, the orphans this subreaper inherits too, and reports each exit.
func reap(out chan<- reaped) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: none left now; more may come
			time.Sleep(20 * time.Millisecond)
			continue
		}
		select {
		case out <- reaped{pid: pid, ws: ws}:
		default: // nobody waits for this one
		}
	}
}

// stopAll stops the node: the kubelet and kube-proxy first (they act on the others), then every
// pod's processes, containerd, and whatever is left below this process.
func stopAll(cfg *Config, children []child, exits <-chan reaped, reaping bool) {
	byName := map[string]*exec.Cmd{}
	byPID := map[int]*exec.Cmd{}
	for _, c := range children {
		byName[c.name] = c.cmd
		byPID[c.cmd.Process.Pid] = c.cmd
	}
	// Killed through os.Process, which holds a pidfd: a PID reaped meanwhile is never signalled.
	kill := func(pid int) { _ = byPID[pid].Process.Kill() }
	stop := func(grace time.Duration, names ...string) {
		left := map[int]string{}
		for _, n := range names {
			if cmd := byName[n]; cmd != nil && cmd.Process != nil {
				if cmd.Process.Signal(syscall.SIGTERM) == nil {
					left[cmd.Process.Pid] = n
				}
			}
		}
		end := time.After(grace)
		for len(left) > 0 {
			if !reaping {
				for pid := range left {
					var ws unix.WaitStatus
					if p, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); p == pid {
						delete(left, pid)
					}
				}
				select {
				case <-end:
					for pid, n := range left {
						fmt.Printf("node %s: %s did not stop in %s: SIGKILL\n", cfg.Name, n, grace)
						kill(pid)
					}
					return
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			select {
			case r := <-exits:
				delete(left, r.pid)
			case <-end:
				for pid, n := range left {
					fmt.Printf("node %s: %s did not stop in %s: SIGKILL\n", cfg.Name, n, grace)
					kill(pid)
				}
				return
			}
		}
	}
	stop(stopKubelet, "kubelet", "kube-proxy")
	if err := killCgroups(cfg.CgroupRoot, stopPods); err != nil {
		fmt.Printf("node %s: %v\n", cfg.Name, err)
	}
	stop(stopContainerd, "containerd")
	// The shims and anything else inherited.
	end := time.Now().Add(stopRest)
	for time.Now().Before(end) {
		kids := childrenOf(os.Getpid())
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if !reaping {
			for _, pid := range kids {
				var ws unix.WaitStatus
				_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("node %s: processes left: %v\n", cfg.Name, childrenOf(os.Getpid()))
}

// childrenOf lists the live (not zombie) children of pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil && pp == pid {
			out = append(out, p)
		}
	}
	return out
}

// setupNodeNetwork configures the node's end of the veth (moved here by the host), loopback
// and forwarding, which in this namespace concerns the node alone.
func (c *Config) setupNodeNetwork() error {
	n := c.Network
	for _, s := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", n.NodeIP + "/" + strconv.Itoa(linkPrefix), "dev", n.NodeIf},
		{"link", "set", n.NodeIf, "up"},
		{"route", "add", "default", "via", n.HostIP},
	} {
		if err := command(context.Background(), "ip", s...); err != nil {
			return fmt.Errorf("node network: %w", err)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("node network: ip_forward: %w", err)
	}
	return nil
}

// mountNodeFS gives the node its own /var/log, /var/lib and /run (the kubelet, containerd's
// shims and the CNI plugins write fixed paths there) and shows the kubelet the kernel settings
// it insists on (protectKernelDefaults) without changing the host's.
func (c *Config) mountNodeFS() error {
	for i, dst := range nodePrivateDirs {
		m := struct{ src, dst string }{c.path("fs", strconv.Itoa(i)+strings.ReplaceAll(dst, "/", "-")), dst}
		if err := os.MkdirAll(m.src, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", m.src, m.dst, err)
		}
	}
	dir := c.path("sysctl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, s := range []struct{ key, value string }{
		{"vm/overcommit_memory", "1"}, {"kernel/panic", "10"}, {"kernel/panic_on_oops", "1"},
	} {
		src := filepath.Join(dir, strings.ReplaceAll(s.key, "/", "."))
		if err := os.WriteFile(src, []byte(s.value+"\n"), 0o644); err != nil {
			return err
		}
		if err := unix.Mount(src, "/proc/sys/"+s.key, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("show the kubelet %s=%s: %w", s.key, s.value, err)
		}
	}
	return nil
}

// awaitSocket waits for containerd's socket to accept connections.
func (c *Config) awaitSocket(timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		err := command(context.Background(), c.Ctr, "--address", c.socket(), "version")
		if err == nil {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("containerd did not answer within %s: %w (log: %s)", timeout, err, c.logFile("containerd"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// importImages imports the image archives into the namespace the CRI plugin reads.
func (c *Config) importImages() error { return c.Import(context.Background(), c.Images) }

// Import imports image archives into the running node's containerd. Its socket is a file on
// the host, so this works from outside the node's namespaces too.
func (c *Config) Import(ctx context.Context, archives []string) error {
	for _, img := range archives {
		if err := command(ctx, c.Ctr, "--address", c.socket(), "--namespace", "k8s.io", "images", "import", img); err != nil {
			return fmt.Errorf("import image %s: %w", img, err)
		}
	}
	return nil
}

// lockNode takes the node's lock, waiting up to innerGrace for a node that is still stopping.
func lockNode(ctx context.Context, cfg *Config) (*os.File, error) {
	f, err := os.OpenFile(cfg.path("node.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	end := time.Now().Add(innerGrace + 2*time.Second)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(end) || ctx.Err() != nil {
			f.Close()
			return nil, fmt.Errorf("node %s: the last run has not stopped (%s is locked): %w", cfg.Name, f.Name(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StartedAt is when the node's process last started (zero if never): a Ready condition or
// lease from before it is the last run's.
func StartedAt(cfg *Config) time.Time {
	b, err := os.ReadFile(cfg.startedFile())
	if err != nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	return t
}
