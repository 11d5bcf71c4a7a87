package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPauseExitsOnSignal runs `kueuelab pause` as the pause image does and stops it as a
// container runtime does: SIGTERM (or SIGINT) ends it with status 0.
func TestPauseExitsOnSignal(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, self, "pause")
			cmd.Env = append(os.Environ(), asMain+"=1")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Its first line says the handler is in place: a signal before it would kill it.
			line, err := bufio.NewReader(stderr).ReadString('\n')
			if err != nil || !strings.Contains(line, "waiting") {
				cmd.Process.Kill()
				t.Fatalf("first line %q, %v; want the pause command waiting", line, err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("kueuelab pause after %s: %v (%s), want exit status 0", sig, err, cmd.ProcessState)
			}
		})
	}
}

// TestReap: a child that has exited is a zombie until reaped; reap collects it and returns
// while another child still runs.
func TestReap(t *testing.T) {
	done := exec.Command("true")
	running := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{done, running} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		running.Process.Kill()
		running.Wait()
	}()
	state := func(pid int) string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return "gone"
		}
		// pid (comm) state ...; comm may hold spaces, so the state follows the last ')'.
		s := string(b)
		return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
	}
	for deadline := time.Now().Add(10 * time.Second); state(done.Process.Pid) != "Z"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("true did not exit: state %s", state(done.Process.Pid))
		}
	}
	reap()
	if s := state(done.Process.Pid); s != "gone" {
		t.Errorf("the exited child after reap: state %s, want reaped", s)
	}
	if s := state(running.Process.Pid); s == "gone" || s == "Z" {
		t.Errorf("the running child after reap: state %s, want running", s)
	}
}
