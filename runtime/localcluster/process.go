package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kueuelab/kueuelab/runtime/tools"
)

// process is one component the cluster runs as a child process.
type process struct {
	name string
	bin  string   // the binary; its path must appear in /proc/<pid>/cmdline for the PID to count as ours
	argv []string // full command line (argv[0] may be a wrapper such as unshare)
	env  []string // added to the environment
}

func (s *State) pidFile(name string) string { return filepath.Join(s.Dir, "run", name+".pid") }
func (s *State) logFile(name string) string { return filepath.Join(s.Dir, "logs", name+".log") }

// running returns the PID of the component if its PID file names a live process whose command
// line still contains the component's binary (so a recycled PID is never signalled).
func (s *State) running(name, bin string) (int, bool) {
	b, err := os.ReadFile(s.pidFile(name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, cmdlineMatches(pid, bin)
}

func cmdlineMatches(pid int, bin string) bool {
	cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cl) == 0 { // gone, or a zombie
		return false
	}
	return bytes.Contains(cl, []byte(bin))
}

// execRunner starts components as child processes of the supervisor, each in its own session
// (so a signal to the supervisor's process group never reaches them, and they outlive a
// supervisor that dies: the next one adopts them), output appended to its log.
type execRunner struct {
	s    *State
	wake chan<- struct{} // told (without blocking) when a child exits; may be nil
}

func (r execRunner) start(p process, why string) (proc, error) {
	keepInheritedFDs()
	logf, err := os.OpenFile(r.s.logFile(p.name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n--- %s kueuelab: %s: %s\n", time.Now().Format(time.RFC3339), why, strings.Join(p.argv, " "))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = r.s.Dir
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	c := &childProc{cmd: cmd, ch: make(chan struct{}), wake: r.wake}
	go c.wait()
	if err := os.WriteFile(r.s.pidFile(p.name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = c.signal(syscall.SIGKILL)
		<-c.ch
		return nil, err
	}
	return c, nil
}

func (r execRunner) adopt(p process) (proc, bool) {
	pid, ok := r.s.running(p.name, p.bin)
	if !ok {
		return nil, false
	}
	a := &adoptedProc{p: pid, bin: p.bin, ticks: procStartTicks(pid), ch: make(chan struct{}), wake: r.wake}
	go a.watch()
	return a, true
}

// keepInheritedFDs marks every descriptor above stderr close-on-exec, so no process the cluster
// starts inherits one this program was given: run as `flock LOCK kueuelab cluster up`, the
// supervisor and every component would hold LOCK for as long as the cluster runs. (Descriptors
// Go opens are close-on-exec already.)
func keepInheritedFDs() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// childProc is a process this supervisor started: Wait reaps it and tells how it ended. Signals
// go through os.Process, which holds a pidfd, so a recycled PID is never signalled.
type childProc struct {
	cmd  *exec.Cmd
	ch   chan struct{}
	ex   Exit
	wake chan<- struct{}
}

func (c *childProc) wait() {
	err := c.cmd.Wait()
	ps := c.cmd.ProcessState
	switch {
	case ps == nil:
		c.ex = Exit{Code: -1, Reason: fmt.Sprintf("wait: %v", err)}
	default:
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.ex = Exit{Code: -1, Signal: unix.SignalName(ws.Signal())}
		} else {
			c.ex = Exit{Code: ps.ExitCode()}
		}
	}
	close(c.ch)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *childProc) pid() int              { return c.cmd.Process.Pid }
func (c *childProc) done() <-chan struct{} { return c.ch }
func (c *childProc) exit() Exit            { return c.ex }
func (c *childProc) signal(sig syscall.Signal) error {
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// adoptedProc is a component an earlier supervisor started. It is not our child, so its exit is
// seen by polling /proc and its exit code is unknown; it is signalled only while its start time
// and command line are still the ones adopted.
type adoptedProc struct {
	p     int
	bin   string
	ticks uint64
	ch    chan struct{}
	wake  chan<- struct{}
}

func (a *adoptedProc) alive() bool {
	return procStartTicks(a.p) == a.ticks && cmdlineMatches(a.p, a.bin)
}

func (a *adoptedProc) watch() {
	for a.alive() {
		time.Sleep(tickInterval)
	}
	close(a.ch)
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *adoptedProc) pid() int              { return a.p }
func (a *adoptedProc) done() <-chan struct{} { return a.ch }
func (a *adoptedProc) exit() Exit {
	return Exit{Code: -1, Reason: "exited (status unknown: adopted from an earlier supervisor)"}
}
func (a *adoptedProc) signal(sig syscall.Signal) error {
	if !a.alive() {
		return nil
	}
	if err := syscall.Kill(a.p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// stop sends SIGTERM to the component's process, then SIGKILL after grace, and removes its PID file.
func (s *State) stop(ctx context.Context, name, bin string, grace time.Duration) (bool, error) {
	pid, ok := s.running(name, bin)
	defer os.Remove(s.pidFile(name))
	if !ok {
		return false, nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, fmt.Errorf("stop %s (pid %d): %w", name, pid, err)
	}
	gone := func(context.Context) (bool, error) { return !cmdlineMatches(pid, bin), nil }
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, grace, true, gone); err == nil {
		return true, nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, fmt.Errorf("kill %s (pid %d): %w", name, pid, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, gone); err != nil {
		return false, fmt.Errorf("%s (pid %d) still alive after SIGKILL", name, pid)
	}
	return true, nil
}

// rssKB is the resident set size of pid (VmRSS in /proc/<pid>/status), 0 if unknown.
func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// binaries is where each component's executable is (present or not): the set's file in the bin
// dir, this executable for stand-ins.
func (s *State) binaries() map[string]string {
	out := map[string]string{}
	for _, c := range tools.Pinned().Components {
		out[c.Name] = filepath.Join(s.BinDir, c.FileName())
	}
	// A stand-in's spec matches on its command line, not on the executable.
	exe, _ := os.Executable()
	for _, op := range operators() {
		if op.StandIn != "" {
			out[op.StandIn] = exe
		}
	}
	return out
}

// matchers is, per component, what its command line contains when it is this cluster's: the
// executable's path, or a stand-in's arguments. In a half-created state without a bin dir the
// binary's file name is matched.
func (s *State) matchers() map[string]string {
	out := s.binaries()
	for name, bin := range out {
		if s.BinDir == "" {
			out[name] = filepath.Base(bin)
		}
	}
	for _, op := range operators() {
		if op.StandIn != "" {
			out[op.StandIn] = standInArg + "\x00" + op.StandIn + "\x00" + s.Kubeconfig()
		}
	}
	out[RealNode] = s.realNodeMatcher()
	return out
}
