package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// This file is the supervisor's outside: how Up starts it (as a daemon or in-process), how Up
// asks it for a component and awaits readiness, and how Down stops it.

// Daemon returns the command that runs `Supervise(ctx, root, name)` in a new process, e.g.
// `kueuelab cluster supervise --name NAME --state-root ROOT`. Up starts it detached (own session,
// output in logs/supervisor.log), so the components stay supervised after the caller exits.
type Daemon func(root, name string) (*exec.Cmd, error)

// DefaultDaemon is the Daemon Up uses when Options.Daemon is nil; the kueuelab command sets it to
// re-execute itself. Left nil (a test binary, a library user), the supervisor runs inside the
// program that calls Up and stops at Down or when that program exits (the components then run
// on unsupervised, and the next Up supervises them again).
var DefaultDaemon Daemon

// Supervise runs the supervisor of cluster name under root (StateRoot() when empty) until ctx
// ends or `cluster down` asks it to stop; it then stops the components. This is the body of the
// daemon that Daemon starts.
func Supervise(ctx context.Context, root, name string) error {
	s, ok, err := Load(root, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no cluster %q under %s", name, filepath.Dir(s.Dir))
	}
	bins, err := tools.Locate(s.BinDir, tools.Pinned())
	if err != nil {
		return err
	}
	if err := addStandIns(bins); err != nil {
		return err
	}
	p, err := ensurePKIReadOnly(s.path("pki"))
	if err != nil {
		return err
	}
	specs, err := s.specs(bins, p)
	if err != nil {
		return err
	}
	sup, release, err := s.newSupervisor(specs, false)
	if err != nil {
		return err
	}
	defer release()
	return sup.Run(ctx)
}

// newSupervisor takes the cluster's supervisor lock and builds its supervisor; release closes
// the lock and the log.
func (s *State) newSupervisor(specs map[string]spec, inProcess bool) (*Supervisor, func(), error) {
	lock, err := os.OpenFile(s.path("run", "supervisor.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, err
	}
	// A supervisor that just wrote its last status may not have released the lock yet.
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		return syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil, nil
	}); err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("cluster %s is supervised by another process (%s is locked)", s.Name, s.path("run", "supervisor.lock"))
	}
	logf, err := os.OpenFile(s.logFile("supervisor"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	wake := make(chan struct{}, 1)
	sup := newSupervisor(s, specs, DefaultPolicy, clock.RealClock{}, execRunner{s: s, wake: wake}, logf)
	sup.wake = wake
	sup.preStart = s.preStartHooks()
	pid := os.Getpid()
	sup.self = SupervisorInfo{PID: pid, StartTicks: procStartTicks(pid), Started: time.Now(), InProcess: inProcess}
	return sup, func() { logf.Close(); lock.Close() }, nil
}

// preStartHooks prepare a component's restart as Up prepared its first start, keyed by
// component: KWOK's, and those the registry's operators declare (render.Operator.StaleLease,
// OperatorWebhooks.HardcodedCertDir).
func (s *State) preStartHooks() map[string]func(context.Context) error {
	apiClient := lazyClient(s.Kubeconfig())
	hooks := map[string]func(context.Context) error{
		// KWOK drives a node's pods only while it holds the node's lease, under an identity that
		// is new on every start: the leases a killed KWOK held would leave every pod unstarted
		// and unfinished until they expire (--node-lease-duration-seconds, 40 s), while the new
		// process reports healthy. The old KWOK is gone, so its node leases go too.
		KWOK: func(ctx context.Context) error {
			c, err := apiClient()
			if err != nil {
				return err
			}
			var nodes corev1.NodeList
			if err := c.List(ctx, &nodes); err != nil {
				return fmt.Errorf("list nodes: %w", err)
			}
			for _, n := range nodes.Items {
				if n.Annotations[cluster.KWOKNodeAnnotation] != "fake" {
					continue
				}
				lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: n.Name}}
				if err := client.IgnoreNotFound(c.Delete(ctx, lease)); err != nil {
					return fmt.Errorf("delete the stale lease of node %s: %w", n.Name, err)
				}
			}
			return nil
		},
	}
	for _, op := range operators() {
		var steps []func(context.Context) error
		// The mount point of a private cert dir must exist on the host (a /tmp cleaner may have
		// removed it since the first start).
		if w := op.Webhooks; w != nil && w.HardcodedCertDir != "" {
			dir := w.HardcodedCertDir
			steps = append(steps, func(context.Context) error { return os.MkdirAll(dir, 0o755) })
		}
		// An operator whose leader election is always on has an identity that is new on every
		// start (mpi-operator: hostname+UUID): the lease a killed process held would make the new
		// one wait up to the lease duration while already reporting healthy. The old process is
		// gone, so its lease goes too.
		if op.StaleLease != "" {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: op.Namespace, Name: op.StaleLease}}
			steps = append(steps, func(ctx context.Context) error {
				c, err := apiClient()
				if err != nil {
					return err
				}
				if err := client.IgnoreNotFound(c.Delete(ctx, lease.DeepCopy())); err != nil {
					return fmt.Errorf("delete the stale %s lease %s/%s: %w", op.Name, lease.Namespace, lease.Name, err)
				}
				return nil
			})
		}
		if len(steps) == 0 {
			continue
		}
		hooks[op.Name] = func(ctx context.Context) error {
			for _, step := range steps {
				if err := step(ctx); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return hooks
}

// ensureSupervisor starts the cluster's supervisor unless one is alive: the daemon when there is
// a Daemon, else in this process.
func (s *State) ensureSupervisor(ctx context.Context, specs map[string]spec, daemon Daemon) error {
	if h, err := ReadHealth(s.Dir); err == nil && h.Supervisor.Alive {
		return nil
	}
	// A new supervisor starts from an empty desired set: Up asks for each component in its turn,
	// after what it needs (CRDs, certificates, webhooks) is in place. The list an earlier
	// supervisor left would start them all at once; a shutdown request left by a Down that did
	// not finish would stop the new supervisor.
	if err := writeDesired(s.Dir, desiredState{Components: []desiredComponent{}}); err != nil {
		return err
	}
	if daemon == nil {
		daemon = DefaultDaemon
	}
	if daemon == nil {
		sup, release, err := s.newSupervisor(specs, true)
		if err != nil {
			return err
		}
		go func() {
			defer release()
			_ = sup.Run(context.Background()) // its errors are in logs/supervisor.log
		}()
		return s.awaitSupervisor(ctx, os.Getpid(), nil)
	}
	cmd, err := daemon(filepath.Dir(s.Dir), s.Name)
	if err != nil {
		return fmt.Errorf("supervisor command: %w", err)
	}
	logf, err := os.OpenFile(s.logFile("supervisor"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Dir = s.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	keepInheritedFDs()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the supervisor: %w", err)
	}
	exited := make(chan struct{})
	// Reap the daemon if it exits while this process lives (an e2e test binary).
	go func() { _ = cmd.Wait(); close(exited) }()
	return s.awaitSupervisor(ctx, cmd.Process.Pid, exited)
}

// awaitSupervisor waits until the supervisor pid has written its first status.
func (s *State) awaitSupervisor(ctx context.Context, pid int, exited <-chan struct{}) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.New("supervisor exited")
		default:
		}
		h, err := ReadHealth(s.Dir)
		return err == nil && h.Supervisor.PID == pid && h.Supervisor.Alive, nil
	})
	if err != nil {
		return fmt.Errorf("supervisor of cluster %s (pid %d) did not start: %w%s", s.Name, pid, err, lastLines(s.logFile("supervisor"), 20))
	}
	return nil
}

// enable adds name to the desired components; a crash-looping or stopped one gets a new epoch,
// which makes the supervisor start it over. It returns the epoch to await.
func (s *State) enable(name string) (int, error) { return s.enableConfig(name, "") }

// enableConfig is enable for a component that reads a configuration file only when it starts:
// config, when not empty, is the digest of that file (configDigest). A new digest gets a new
// epoch, and the supervisor restarts a process that started with another one.
func (s *State) enableConfig(name, config string) (int, error) {
	d, _, err := readDesired(s.Dir)
	if err != nil {
		return 0, err
	}
	var state ComponentState
	if h, err := ReadHealth(s.Dir); err == nil {
		if c, ok := h.Component(name); ok {
			state = c.State
		}
	}
	for i, c := range d.Components {
		if c.Name != name {
			continue
		}
		changed := config != "" && config != c.Config
		if !changed && state != StateCrashLooping && state != StateStopped {
			return c.Epoch, nil
		}
		d.Components[i].Epoch++
		if changed {
			d.Components[i].Config = config
		}
		return d.Components[i].Epoch, writeDesired(s.Dir, d)
	}
	d.Components = append(d.Components, desiredComponent{Name: name, Epoch: 1, Config: config})
	return 1, writeDesired(s.Dir, d)
}

// awaitReady waits until the supervisor reports name ready at epoch (or later); it fails at once
// when the component crash-loops or the supervisor is gone.
func (s *State) awaitReady(ctx context.Context, name string, epoch int, timeout time.Duration) (ComponentHealth, error) {
	var last ComponentHealth
	var fail error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		h, err := ReadHealth(s.Dir)
		if err != nil {
			return false, err
		}
		if !h.Supervisor.Alive {
			fail = fmt.Errorf("the supervisor of cluster %s exited%s", s.Name, lastLines(s.logFile("supervisor"), 20))
			return false, fail
		}
		c, ok := h.Component(name)
		if !ok || c.Epoch < epoch {
			return false, nil
		}
		last = c
		switch c.State {
		case StateReady:
			return true, nil
		case StateCrashLooping:
			fail = (&Health{Components: []ComponentHealth{c}, Policy: h.Policy}).CrashLooping(s.Dir, 20)
			return false, fail
		}
		return false, nil
	})
	if fail != nil {
		return last, fail
	}
	if err != nil {
		detail := string(last.State)
		if last.Message != "" {
			detail += ": " + last.Message
		}
		return last, fmt.Errorf("%s not ready: %w (%s)%s", name, err, detail, lastLines(s.logFile(name), 20))
	}
	return last, nil
}

// stopSupervisor asks a live supervisor to stop its components and exit, and waits for it. A
// daemon that does not exit in time gets SIGTERM, then SIGKILL; an in-process supervisor is only
// asked. It prints the components that were running.
func (s *State) stopSupervisor(ctx context.Context, out io.Writer) error {
	h, err := ReadHealth(s.Dir)
	if err != nil || !h.Supervisor.Alive {
		return nil
	}
	d, _, err := readDesired(s.Dir)
	if err != nil {
		return err
	}
	d.Shutdown = true
	if err := writeDesired(s.Dir, d); err != nil {
		return err
	}
	sv := h.Supervisor
	gone := func(context.Context) (bool, error) {
		now, err := ReadHealth(s.Dir)
		if err != nil || now.Supervisor.PID != sv.PID {
			return err == nil, nil
		}
		// A daemon writes its last status just before it exits: wait for the process too.
		return !now.Supervisor.Alive && (sv.InProcess || procStartTicks(sv.PID) != sv.StartTicks), nil
	}
	// Every component may use its whole grace.
	budget := time.Duration(len(h.Components)+1) * (DefaultPolicy.StopGrace + 5*time.Second)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, budget, true, gone)
	if err != nil && !sv.InProcess {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			if procStartTicks(sv.PID) != sv.StartTicks {
				break
			}
			fmt.Fprintf(out, "  supervisor (pid %d) did not stop; sending %s\n", sv.PID, sig)
			if kerr := syscall.Kill(sv.PID, sig); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
				return fmt.Errorf("signal the supervisor (pid %d): %w", sv.PID, kerr)
			}
			if err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, budget, true, func(context.Context) (bool, error) {
				return procStartTicks(sv.PID) != sv.StartTicks, nil
			}); err == nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("supervisor (pid %d) did not stop: %w", sv.PID, err)
	}
	for i := len(h.Components) - 1; i >= 0; i-- {
		if c := h.Components[i]; c.PID > 0 {
			fmt.Fprintf(out, "  stopped %s\n", c.Name)
		}
	}
	return nil
}
