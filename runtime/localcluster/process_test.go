package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/internal/testutil"
)

func testState(t *testing.T) *State {
	t.Helper()
	s := &State{Name: "test", Dir: t.TempDir()}
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func awaitDone(t *testing.T, p proc) Exit {
	t.Helper()
	select {
	case <-p.done():
		return p.exit()
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d did not exit", p.pid())
		return Exit{}
	}
}

func TestExecRunnerExitStatus(t *testing.T) {
	s := testState(t)
	sh, sleep := testutil.Command(t, "sh"), testutil.Command(t, "sleep")
	r := execRunner{s: s}

	p, err := r.start(process{name: "fails", bin: sh, argv: []string{sh, "-c", "echo boom; exit 3"}}, "restart 2 after exit code 3")
	if err != nil {
		t.Fatal(err)
	}
	if e := awaitDone(t, p); e.Code != 3 || e.Signal != "" {
		t.Fatalf("exit %+v, want code 3", e)
	}
	log, _ := os.ReadFile(s.logFile("fails"))
	if !strings.Contains(string(log), "kueuelab: restart 2 after exit code 3: "+sh) || !strings.Contains(string(log), "boom") {
		t.Fatalf("log:\n%s", log)
	}

	p, err = r.start(process{name: "sleeper", bin: sleep, argv: []string{sleep, "60"}}, "start")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(s.pidFile("sleeper")); strings.TrimSpace(string(b)) != strconv.Itoa(p.pid()) {
		t.Fatalf("pid file %q, want %d", b, p.pid())
	}
	// Start returns once exec has begun, but the kernel fills /proc/PID/cmdline only later in
	// exec; a supervisor adopts processes started long before, so wait for the command line.
	deadline := time.Now().Add(10 * time.Second)
	for !cmdlineMatches(p.pid(), sleep) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never showed %s in its command line", p.pid(), sleep)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A later supervisor adopts it by its PID file, and sees it go.
	a, ok := execRunner{s: s}.adopt(process{name: "sleeper", bin: sleep})
	if !ok || a.pid() != p.pid() {
		t.Fatalf("adopt: %v %v", a, ok)
	}
	if _, ok := (execRunner{s: s}).adopt(process{name: "sleeper", bin: filepath.Join(t.TempDir(), "other")}); ok {
		t.Fatal("adopted a process whose command line names another binary")
	}
	if err := p.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if e := awaitDone(t, p); e.Signal != "SIGKILL" || e.Code != -1 {
		t.Fatalf("exit %+v, want SIGKILL", e)
	}
	if e := awaitDone(t, a); e.Reason == "" {
		t.Fatalf("adopted exit %+v, want an unknown status", e)
	}
	if err := a.signal(syscall.SIGTERM); err != nil { // gone: nothing is signalled
		t.Fatal(err)
	}
	if _, err := r.start(process{name: "missing", bin: "/nonexistent", argv: []string{"/nonexistent/bin"}}, "start"); err == nil {
		t.Fatal("starting a missing binary succeeded")
	}
}

// A descriptor this program inherited without close-on-exec (flock's lock) does not reach the
// components.
func TestComponentsDoNotInheritDescriptors(t *testing.T) {
	s := testState(t)
	sh := testutil.Command(t, "sh")
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "lock"), syscall.O_CREAT|syscall.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	script := fmt.Sprintf("if [ -e /proc/$$/fd/%d ]; then echo inherited; else echo clean; fi", fd)
	p, err := execRunner{s: s}.start(process{name: "fds", bin: sh, argv: []string{sh, "-c", script}}, "start")
	if err != nil {
		t.Fatal(err)
	}
	awaitDone(t, p)
	if log, _ := os.ReadFile(s.logFile("fds")); !strings.HasSuffix(string(log), "clean\n") {
		t.Fatalf("fd %d reached the component:\n%s", fd, log)
	}
}
