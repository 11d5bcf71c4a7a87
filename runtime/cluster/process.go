package cluster

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

// exited reports whether a process we just started is gone (or a zombie) or became something else.
// Right after exec the kernel lets the parent run before the new argv is mapped, so an empty
// cmdline alone does not mean the process is gone.
func exited(pid int, bin string) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) && (st[i+2] == 'Z' || st[i+2] == 'X') {
		return true
	}
	cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err != nil || (len(cl) > 0 && !bytes.Contains(cl, []byte(bin)))
}

// start launches p in its own session (it outlives the CLI), output appended to its log.
func (s *State) start(p process) (int, error) {
	logf, err := os.OpenFile(s.logFile(p.name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n--- %s kueuelab: starting %s\n", time.Now().Format(time.RFC3339), strings.Join(p.argv, " "))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", p.name, err)
	}
	pid := cmd.Process.Pid
	// Reap the child if it dies while this process lives (e2e harness), so it never lingers as a zombie.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(s.pidFile(p.name), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return pid, err
	}
	return pid, nil
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

// awaitHealthy polls check until it passes, the process dies, or timeout expires.
func (s *State) awaitHealthy(ctx context.Context, p process, pid int, timeout time.Duration, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited(pid, p.bin) {
			return false, fmt.Errorf("%s exited", p.name)
		}
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		if last != nil && !strings.Contains(err.Error(), "exited") {
			err = fmt.Errorf("%w (last check: %v)", err, last)
		}
		return fmt.Errorf("%s not healthy: %w\n--- last lines of %s ---\n%s", p.name, err, s.logFile(p.name), tailFile(s.logFile(p.name), 20))
	}
	return nil
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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
	return out
}
