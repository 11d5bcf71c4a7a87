package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeProc is a component process the test ends by hand.
type fakeProc struct {
	p       int
	ch      chan struct{}
	ex      Exit
	ignore  bool          // ignores SIGTERM
	termed  chan struct{} // closed when an ignored SIGTERM arrives
	signals []syscall.Signal
}

func (f *fakeProc) pid() int              { return f.p }
func (f *fakeProc) done() <-chan struct{} { return f.ch }
func (f *fakeProc) exit() Exit            { return f.ex }
func (f *fakeProc) die(e Exit) {
	f.ex = e
	close(f.ch)
}
func (f *fakeProc) signal(sig syscall.Signal) error {
	f.signals = append(f.signals, sig)
	if sig == syscall.SIGTERM && f.ignore {
		close(f.termed)
	}
	switch {
	case sig == syscall.SIGQUIT && !f.ignore:
		f.die(Exit{Code: 2}) // a Go process dumps its goroutines and exits 2
	case sig == syscall.SIGKILL || !f.ignore:
		f.die(Exit{Code: -1, Signal: unix.SignalName(sig)})
	}
	return nil
}

type startRecord struct {
	name, why string
	at        time.Time
}

// fakeRunner starts fakeProcs and records every start.
type fakeRunner struct {
	clock     *testingclock.FakeClock
	nextPID   int
	starts    []startRecord
	current   map[string]*fakeProc
	failStart map[string]error
	adoptable map[string]*fakeProc
}

func (r *fakeRunner) start(p process, why string) (proc, error) {
	r.starts = append(r.starts, startRecord{p.name, why, r.clock.Now()})
	if err := r.failStart[p.name]; err != nil {
		return nil, err
	}
	r.nextPID++
	f := &fakeProc{p: 1000 + r.nextPID, ch: make(chan struct{})}
	r.current[p.name] = f
	return f, nil
}

func (r *fakeRunner) adopt(p process) (proc, bool) {
	f, ok := r.adoptable[p.name]
	if ok {
		r.current[p.name] = f
	}
	return f, ok
}

func (r *fakeRunner) startsOf(name string) []startRecord {
	var out []startRecord
	for _, s := range r.starts {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// harness drives a Supervisor by hand: no loop goroutine, a fake clock, fake processes and
// probes whose answer the test sets.
type harness struct {
	t      *testing.T
	sup    *Supervisor
	run    *fakeRunner
	clock  *testingclock.FakeClock
	mu     sync.Mutex
	health map[string]error
	log    bytes.Buffer
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newHarness(t *testing.T, names ...string) *harness {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{t: t, clock: testingclock.NewFakeClock(t0), health: map[string]error{}}
	h.run = &fakeRunner{clock: h.clock, current: map[string]*fakeProc{}, failStart: map[string]error{}, adoptable: map[string]*fakeProc{}}
	specs := map[string]spec{}
	for _, n := range names {
		specs[n] = spec{process: process{name: n, bin: "/bin/" + n, argv: []string{"/bin/" + n}},
			health: func(context.Context) error { h.mu.Lock(); defer h.mu.Unlock(); return h.health[n] }}
	}
	h.sup = newSupervisor(&State{Name: "test", Dir: dir}, specs, DefaultPolicy, h.clock, h.run, &h.log)
	h.sup.self = SupervisorInfo{PID: os.Getpid(), StartTicks: procStartTicks(os.Getpid()), Started: t0}
	return h
}

func (h *harness) setHealth(name string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.health[name] = err
}

// settle applies the result of every probe in flight.
func (h *harness) settle() {
	for {
		inflight := false
		for _, m := range h.sup.members {
			inflight = inflight || m.probing || m.liveProbing
		}
		if !inflight {
			return
		}
		h.sup.probed(<-h.sup.probes)
	}
}

// after moves the clock by d, then ticks once and applies the probes the tick started.
func (h *harness) after(d time.Duration) {
	h.clock.Step(d)
	h.sup.tick(h.t.Context())
	h.settle()
}

func (h *harness) member(name string) ComponentHealth { return h.sup.members[name].h }

func (h *harness) wantState(name string, want ComponentState) {
	h.t.Helper()
	if got := h.member(name); got.State != want {
		h.t.Fatalf("%s: state %s (%s), want %s\nsupervisor log:\n%s", name, got.State, got.Message, want, h.log.String())
	}
}

// awaitStart moves the clock in ticks until name leaves restarting (bounded).
func (h *harness) awaitStart(name string) {
	h.t.Helper()
	for i := 0; i < 10000 && h.member(name).State == StateRestarting; i++ {
		h.after(tickInterval)
	}
}

// up enables name and brings it to ready.
func (h *harness) up(name string) {
	h.t.Helper()
	h.sup.enable(name, 1)
	h.after(0)
	h.wantState(name, StateStarting)
	h.after(DefaultPolicy.StartingProbe)
	h.wantState(name, StateReady)
}

func TestPolicyBackoff(t *testing.T) {
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
		3200 * time.Millisecond, 6400 * time.Millisecond, 12800 * time.Millisecond, 25600 * time.Millisecond, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := DefaultPolicy.backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %s, want %s", i+1, got, w)
		}
	}
}

func TestRestartAfterExitWithBackoff(t *testing.T) {
	h := newHarness(t, "kueue")
	h.up("kueue")
	first := h.run.current["kueue"]
	h.clock.Step(10 * time.Second)
	first.die(Exit{Code: -1, Signal: "SIGKILL"})
	h.after(0)
	h.wantState("kueue", StateRestarting)
	if c := h.member("kueue"); c.PID != 0 || c.LastExit == nil || c.LastExit.Signal != "SIGKILL" || c.LastExit.RanSeconds != h.clock.Since(c.Started).Seconds() {
		t.Fatalf("after the exit: %+v (last exit %+v)", c, c.LastExit)
	}
	h.after(DefaultPolicy.InitialBackoff - time.Millisecond)
	if n := len(h.run.startsOf("kueue")); n != 1 {
		t.Fatalf("restarted before its backoff: %d starts", n)
	}
	h.after(time.Millisecond)
	starts := h.run.startsOf("kueue")
	if len(starts) != 2 || !strings.HasPrefix(starts[1].why, "restart 1 after signal SIGKILL") {
		t.Fatalf("starts %+v, want a second one logged as restart 1 after SIGKILL", starts)
	}
	c := h.member("kueue")
	if c.State != StateStarting || c.Restarts != 1 || !c.LastRestart.Equal(h.clock.Now()) || c.PID != h.run.current["kueue"].p {
		t.Fatalf("after the restart: %+v", c)
	}
	h.after(DefaultPolicy.StartingProbe)
	h.wantState("kueue", StateReady)

	// A second exit soon after doubles the delay.
	h.run.current["kueue"].die(Exit{Code: 2})
	h.after(0)
	h.after(2*DefaultPolicy.InitialBackoff - time.Millisecond)
	if n := len(h.run.startsOf("kueue")); n != 2 {
		t.Fatalf("restarted before the doubled backoff: %d starts", n)
	}
	h.after(time.Millisecond)
	if c := h.member("kueue"); c.Restarts != 2 || c.State != StateStarting {
		t.Fatalf("after the second restart: %+v", c)
	}
}

func TestCrashLoopRule(t *testing.T) {
	h := newHarness(t, "jobset")
	h.up("jobset")
	// Every process from now on exits at once.
	first := h.clock.Now()
	for i := 0; i < 20 && h.member("jobset").State != StateCrashLooping; i++ {
		h.run.current["jobset"].die(Exit{Code: 1})
		h.after(0)
		h.awaitStart("jobset")
	}
	h.wantState("jobset", StateCrashLooping)
	// 200 ms + 400 ms + 800 ms + 1.6 s + 3.2 s of backoff: the rule decides 6.2 s after the first exit.
	if took := h.clock.Since(first); took != 6200*time.Millisecond {
		t.Errorf("crash loop decided %s after the first exit, want 6.2s", took)
	}
	c := h.member("jobset")
	if c.Restarts != DefaultPolicy.CrashLoopRestarts {
		t.Fatalf("restarts %d, want %d before crash-looping", c.Restarts, DefaultPolicy.CrashLoopRestarts)
	}
	if c.PID != 0 || c.LastExit == nil || c.LastExit.Code != 1 || !strings.Contains(c.Message, "5 restarts within 2m0s") {
		t.Fatalf("crash-looping component: %+v", c)
	}
	n := len(h.run.starts)
	h.after(time.Hour)
	if len(h.run.starts) != n {
		t.Fatalf("a crash-looping component was started again")
	}

	// Asking for it again (Up) starts it over, with a fresh crash-loop budget.
	h.sup.enable("jobset", 2)
	h.after(0)
	h.wantState("jobset", StateStarting)
	if c := h.member("jobset"); c.Restarts != DefaultPolicy.CrashLoopRestarts+1 {
		t.Fatalf("restarts %d after enabling again, want %d", c.Restarts, DefaultPolicy.CrashLoopRestarts+1)
	}
	h.run.current["jobset"].die(Exit{Code: 1})
	h.after(0)
	h.wantState("jobset", StateRestarting)
}

// A component that exits every 50 s is restarted for ever: never 5 restarts within 2 minutes.
// Its backoff doubles (it never ran for BackoffReset) until it runs a full minute once.
func TestCrashLoopWindowSlides(t *testing.T) {
	h := newHarness(t, "kwok")
	h.up("kwok")
	var delays []time.Duration
	for i := 0; i < 8; i++ {
		h.clock.Step(50 * time.Second)
		h.run.current["kwok"].die(Exit{Code: 1})
		h.after(0)
		h.wantState("kwok", StateRestarting)
		exit := h.clock.Now()
		for h.member("kwok").State == StateRestarting {
			h.after(100 * time.Millisecond)
		}
		delays = append(delays, h.clock.Now().Sub(exit))
	}
	if c := h.member("kwok"); c.Restarts != 8 {
		t.Fatalf("restarts %d, want 8", c.Restarts)
	}
	want := []time.Duration{200, 400, 800, 1600, 3200, 6400, 12800, 25600}
	for i := range want {
		if delays[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", delays, want)
		}
	}
	// Having run for BackoffReset, the next exit restarts after InitialBackoff again.
	h.clock.Step(DefaultPolicy.BackoffReset)
	h.run.current["kwok"].die(Exit{Code: 1})
	h.after(0)
	h.after(DefaultPolicy.InitialBackoff)
	h.wantState("kwok", StateStarting)
}

func TestReadinessProbe(t *testing.T) {
	h := newHarness(t, "kueue")
	h.setHealth("kueue", errors.New("connection refused"))
	h.sup.enable("kueue", 1)
	h.after(0)
	h.after(DefaultPolicy.StartingProbe)
	h.wantState("kueue", StateStarting)
	if c := h.member("kueue"); c.Message != "connection refused" {
		t.Fatalf("message %q, want the probe's error", c.Message)
	}
	h.setHealth("kueue", nil)
	h.after(DefaultPolicy.StartingProbe)
	h.wantState("kueue", StateReady)
	ready := h.member("kueue").ReadySince

	h.setHealth("kueue", errors.New("503"))
	h.after(DefaultPolicy.ReadyProbe)
	h.wantState("kueue", StateReady) // one failure is below the threshold
	h.after(DefaultPolicy.ReadyProbe)
	h.wantState("kueue", StateUnready)
	h.setHealth("kueue", nil)
	h.after(DefaultPolicy.StartingProbe) // unready components are probed at the fast period
	h.wantState("kueue", StateReady)
	if c := h.member("kueue"); !c.ReadySince.After(ready) || c.Restarts != 0 {
		t.Fatalf("after recovering: %+v", c)
	}
}

func TestRestartWaitsForTheAPIServer(t *testing.T) {
	h := newHarness(t, Etcd, APIServer, Kueue)
	for _, n := range []string{Etcd, APIServer, Kueue} {
		h.up(n)
	}
	h.setHealth(APIServer, errors.New("refused"))
	h.run.current[APIServer].die(Exit{Code: -1, Signal: "SIGKILL"})
	h.run.current[Kueue].die(Exit{Code: 1})
	h.after(0)
	h.after(time.Second)
	h.wantState(APIServer, StateStarting) // restarted: etcd is ready
	h.wantState(Kueue, StateRestarting)
	if c := h.member(Kueue); c.Message != "waiting for kube-apiserver to be ready" || c.Restarts != 0 {
		t.Fatalf("kueue while the API server starts: %+v", c)
	}
	h.after(time.Minute)
	h.wantState(Kueue, StateRestarting) // a minute of waiting is no crash loop
	h.setHealth(APIServer, nil)
	h.after(DefaultPolicy.StartingProbe)
	h.wantState(APIServer, StateReady)
	h.after(0)
	h.wantState(Kueue, StateStarting)
	if c := h.member(Kueue); c.Restarts != 1 {
		t.Fatalf("kueue restarts %d, want 1", c.Restarts)
	}
}

func TestPreStartHookFailureIsNoCrash(t *testing.T) {
	h := newHarness(t, "mpi-operator")
	fails := 3
	h.sup.preStart = map[string]func(context.Context) error{"mpi-operator": func(context.Context) error {
		if fails > 0 {
			fails--
			return errors.New("API server unavailable")
		}
		return nil
	}}
	h.sup.enable("mpi-operator", 1)
	for i := 0; i < 3; i++ {
		h.after(DefaultPolicy.InitialBackoff)
		if c := h.member("mpi-operator"); c.PID != 0 || !strings.Contains(c.Message, "before start: API server unavailable") {
			t.Fatalf("try %d: %+v", i, c)
		}
	}
	h.after(DefaultPolicy.InitialBackoff)
	c := h.member("mpi-operator")
	if c.State != StateStarting || c.PID == 0 || c.Restarts != 0 || len(h.run.starts) != 1 {
		t.Fatalf("after the hook passed: %+v, %d starts", c, len(h.run.starts))
	}
}

func TestStartFailureCountsAsExit(t *testing.T) {
	h := newHarness(t, "kwok")
	h.up("kwok")
	h.run.failStart["kwok"] = errors.New("exec: no such file")
	h.run.current["kwok"].die(Exit{Code: 1})
	h.after(0)
	h.awaitStart("kwok")
	h.wantState("kwok", StateCrashLooping)
	if c := h.member("kwok"); c.LastExit == nil || !strings.Contains(c.LastExit.Reason, "start failed: exec: no such file") {
		t.Fatalf("last exit %+v", c.LastExit)
	}
}

func TestAdoptRunningProcess(t *testing.T) {
	h := newHarness(t, "kueue")
	old := &fakeProc{p: 77, ch: make(chan struct{})}
	h.run.adoptable["kueue"] = old
	h.sup.enable("kueue", 1)
	h.after(0)
	if len(h.run.starts) != 0 || h.member("kueue").PID != 77 {
		t.Fatalf("adopting: %d starts, %+v", len(h.run.starts), h.member("kueue"))
	}
	h.wantState("kueue", StateReady)
	old.die(Exit{Code: -1, Reason: "exited (status unknown: adopted from an earlier supervisor)"})
	h.after(0)
	h.after(DefaultPolicy.InitialBackoff)
	if c := h.member("kueue"); c.State != StateStarting || c.Restarts != 1 {
		t.Fatalf("after the adopted process exited: %+v", c)
	}
}

func TestStopAllReverseOrder(t *testing.T) {
	h := newHarness(t, Etcd, APIServer, Kueue)
	for _, n := range []string{Etcd, APIServer, Kueue} {
		h.up(n)
	}
	stubborn := h.run.current[APIServer]
	stubborn.ignore, stubborn.termed = true, make(chan struct{})
	done := make(chan struct{})
	go func() { h.sup.stopAll(); close(done) }()
	// The API server ignores SIGTERM: stopAll waits StopGrace on the fake clock, then kills it.
	<-stubborn.termed
	for !h.clock.HasWaiters() {
		runtime.Gosched()
	}
	h.clock.Step(DefaultPolicy.StopGrace)
	<-done
	for _, n := range []string{Etcd, APIServer, Kueue} {
		h.wantState(n, StateStopped)
	}
	if got := fmt.Sprint(stubborn.signals); got != "[terminated killed]" {
		t.Fatalf("API server got %s, want SIGTERM then SIGKILL", got)
	}
	if got := fmt.Sprint(h.run.current[Kueue].signals, h.run.current[Etcd].signals); got != "[terminated] [terminated]" {
		t.Fatalf("signals %s", got)
	}
	log := h.log.String()
	if k, a, e := strings.Index(log, "kueue: stopped"), strings.Index(log, "kube-apiserver: killed"), strings.Index(log, "etcd: stopped"); !(k >= 0 && k < a && a < e) {
		t.Fatalf("stop order in the log is not kueue, kube-apiserver, etcd:\n%s", log)
	}
}

func TestStatusFile(t *testing.T) {
	h := newHarness(t, Etcd, Kueue)
	h.up(Etcd)
	h.sup.enable(Kueue, 1)
	h.after(0)
	if err := h.sup.writeStatus(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHealth(h.sup.st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Supervisor.Alive || got.Cluster != "test" || !got.Updated.Equal(h.clock.Now()) {
		t.Fatalf("supervisor %+v, cluster %q, updated %s", got.Supervisor, got.Cluster, got.Updated)
	}
	if len(got.Components) != 2 || got.Components[0].Name != Etcd || got.Components[1].State != StateStarting {
		t.Fatalf("components %+v", got.Components)
	}
	if got.Ready() || len(got.NotReady()) != 1 || got.NotReady()[0].Name != Kueue {
		t.Fatalf("Ready %v, NotReady %+v", got.Ready(), got.NotReady())
	}
	// Nothing changed: the file (and its Updated stamp) stays.
	h.clock.Step(time.Second)
	if err := h.sup.writeStatus(); err != nil {
		t.Fatal(err)
	}
	if again, _ := ReadHealth(h.sup.st.Dir); !again.Updated.Equal(got.Updated) {
		t.Fatalf("status rewritten without a change")
	}
	h.after(DefaultPolicy.StartingProbe)
	if err := h.sup.writeStatus(); err != nil {
		t.Fatal(err)
	}
	if got, _ = ReadHealth(h.sup.st.Dir); !got.Ready() {
		t.Fatalf("not ready: %+v", got.NotReady())
	}
	// No temp file is left beside it.
	entries, _ := os.ReadDir(h.sup.st.Dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("left %s", e.Name())
		}
	}
	// An exited supervisor, or a PID that is not the supervisor's process any more, is not alive.
	h.sup.self.Exited = true
	_ = h.sup.writeStatus()
	if got, _ = ReadHealth(h.sup.st.Dir); got.Supervisor.Alive || got.Ready() {
		t.Fatalf("exited supervisor reads as alive")
	}
	h.sup.self.Exited, h.sup.self.StartTicks = false, h.sup.self.StartTicks+1
	_ = h.sup.writeStatus()
	if got, _ = ReadHealth(h.sup.st.Dir); got.Supervisor.Alive {
		t.Fatalf("recycled PID reads as alive")
	}
	if _, err := ReadHealth(t.TempDir()); !errors.Is(err, ErrNoSupervisor) {
		t.Fatalf("no status file: %v", err)
	}
}

func TestCarryOverFromDeadSupervisor(t *testing.T) {
	h := newHarness(t, Kueue)
	h.up(Kueue)
	h.run.current[Kueue].die(Exit{Code: 1})
	h.after(0)
	h.after(DefaultPolicy.InitialBackoff)
	h.sup.self.PID = 0 // the supervisor died
	if err := h.sup.writeStatus(); err != nil {
		t.Fatal(err)
	}
	next := newSupervisor(h.sup.st, h.sup.specs, DefaultPolicy, h.clock, h.run, &h.log)
	next.enable(Kueue, 1) // adopts nothing: the fake runner has no adoptable process
	next.tick(t.Context())
	if c := next.members[Kueue].h; c.Restarts != 2 || c.LastExit == nil {
		t.Fatalf("carried over: %+v, want the earlier restart counted and this start as the second", c)
	}
	// After a clean shutdown the counts start over.
	next.self = SupervisorInfo{PID: os.Getpid(), StartTicks: procStartTicks(os.Getpid()), Exited: true}
	if err := next.writeStatus(); err != nil {
		t.Fatal(err)
	}
	fresh := newSupervisor(h.sup.st, h.sup.specs, DefaultPolicy, h.clock, h.run, &h.log)
	fresh.enable(Kueue, 1)
	fresh.tick(t.Context())
	if c := fresh.members[Kueue].h; c.Restarts != 0 {
		t.Fatalf("after a clean shutdown: %+v", c)
	}
}

func TestDesiredFile(t *testing.T) {
	h := newHarness(t, Etcd, APIServer)
	dir := h.sup.st.Dir
	st := &State{Name: "test", Dir: dir}
	for _, n := range []string{Etcd, APIServer} {
		if epoch, err := st.enable(n); err != nil || epoch != 1 {
			t.Fatalf("enable %s: epoch %d, %v", n, epoch, err)
		}
	}
	if shutdown, err := h.sup.syncDesired(); err != nil || shutdown {
		t.Fatalf("sync: %v, shutdown %v", err, shutdown)
	}
	if fmt.Sprint(h.sup.order) != "[etcd kube-apiserver]" {
		t.Fatalf("order %v", h.sup.order)
	}
	// Enabling a component that is not crash-looping again changes nothing.
	before, _ := os.ReadFile(desiredFile(dir))
	_ = h.sup.writeStatus()
	if epoch, err := st.enable(Etcd); err != nil || epoch != 1 {
		t.Fatalf("enable again: epoch %d, %v", epoch, err)
	}
	if after, _ := os.ReadFile(desiredFile(dir)); !bytes.Equal(before, after) {
		t.Fatalf("desired file rewritten:\n%s", after)
	}
	// A crash-looping one gets a new epoch.
	h.sup.members[Etcd].h.State = StateCrashLooping
	_ = h.sup.writeStatus()
	if epoch, err := st.enable(Etcd); err != nil || epoch != 2 {
		t.Fatalf("enable a crash-looping one: epoch %d, %v", epoch, err)
	}
	d, _, err := readDesired(dir)
	if err != nil || d.Components[0].Epoch != 2 {
		t.Fatalf("desired %+v, %v", d, err)
	}
	d.Shutdown = true
	if err := writeDesired(dir, d); err != nil {
		t.Fatal(err)
	}
	if shutdown, err := h.sup.syncDesired(); err != nil || !shutdown {
		t.Fatalf("sync: %v, shutdown %v", err, shutdown)
	}
	if h.sup.members[Etcd].h.Epoch != 2 || h.sup.members[Etcd].h.State != StateRestarting {
		t.Fatalf("etcd after its new epoch: %+v", h.sup.members[Etcd].h)
	}
}

func TestCrashLoopErrorAndLogTail(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for i := 0; i < 100000; i++ { // larger than the tail LogTail reads
		fmt.Fprintf(&log, "line %d\n", i)
	}
	if err := os.WriteFile(ComponentLog(dir, "jobset"), []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := LogTail(ComponentLog(dir, "jobset"), 3); got != "line 99997\nline 99998\nline 99999" {
		t.Fatalf("tail %q", got)
	}
	h := &Health{Policy: DefaultPolicy.summary(), Components: []ComponentHealth{
		{Name: "kueue", State: StateReady},
		{Name: "jobset", State: StateCrashLooping, Restarts: 5, LastExit: &Exit{Time: t0, Code: 1, RanSeconds: 0.1}},
	}}
	err := h.CrashLooping(dir, 2)
	var cl *CrashLoopError
	if !errors.As(err, &cl) || cl.Component.Name != "jobset" {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"jobset is crash-looping (5 restarts within 2m0s, last exit: exit code 1 at", "(ran 100ms)", "line 99998\nline 99999"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	h.Components[1].State = StateReady
	if err := h.CrashLooping(dir, 2); err != nil {
		t.Fatalf("no component crash-loops, got %v", err)
	}
}

// Up asks for a crash-looping component again and must not read the crash loop it just ended as
// the answer: it waits for the supervisor to report on the new epoch.
func TestAwaitReadyWaitsForTheNewEpoch(t *testing.T) {
	h := newHarness(t, Kueue)
	h.up(Kueue)
	m := h.sup.members[Kueue]
	m.h.State = StateCrashLooping
	if err := h.sup.writeStatus(); err != nil {
		t.Fatal(err)
	}
	st := h.sup.st
	if _, err := st.awaitReady(t.Context(), Kueue, 1, time.Minute); !errors.As(err, new(*CrashLoopError)) {
		t.Fatalf("epoch 1: %v, want its crash loop", err)
	}
	// While the status answers epoch 1, awaiting epoch 2 only runs into its deadline.
	_, err := st.awaitReady(t.Context(), Kueue, 2, 300*time.Millisecond)
	if err == nil || errors.As(err, new(*CrashLoopError)) || !strings.Contains(err.Error(), "kueue not ready") {
		t.Fatalf("epoch 2 against a status of epoch 1: %v, want a timeout", err)
	}
	m.h.State, m.h.Epoch = StateReady, 2
	if err := h.sup.writeStatus(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.awaitReady(t.Context(), Kueue, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestPreStartHooksFollowTheRegistry: every operator that declares a stale lease or a
// hard-coded cert dir gets a hook before each (re)start, and so does KWOK; no other component.
func TestPreStartHooksFollowTheRegistry(t *testing.T) {
	s := &State{Name: "hooks", Dir: t.TempDir()}
	hooks := s.preStartHooks()
	want := map[string]bool{KWOK: true}
	for _, op := range operators() {
		if op.StaleLease != "" || (op.Webhooks != nil && op.Webhooks.HardcodedCertDir != "") {
			want[op.Name] = true
		}
	}
	// The operators whose restarts need the hooks (a stale leader lease, hard-coded webhook
	// certificates) are among them.
	for _, name := range []string{"mpi-operator", "training-operator"} {
		if !want[name] {
			t.Errorf("registry: %s declares neither a stale lease nor a hard-coded cert dir", name)
		}
	}
	for name := range hooks {
		if !want[name] {
			t.Errorf("hook for %s, which declares nothing to prepare", name)
		}
	}
	for name := range want {
		if hooks[name] == nil {
			t.Errorf("no pre-start hook for %s", name)
		}
	}
}

// A component that reads its configuration file only at start (kube-scheduler) is restarted by
// the supervisor when Up asks for it with another file: stopped, started at once, and neither
// counted as a restart nor spent from the crash-loop budget. A restart after a crash keeps the
// configuration.
func TestReconfigureRestartsWithTheNewConfig(t *testing.T) {
	h := newHarness(t, Scheduler)
	h.sup.enableConfig(Scheduler, 1, "aaa")
	h.after(0)
	h.after(DefaultPolicy.StartingProbe)
	h.wantState(Scheduler, StateReady)
	if c := h.member(Scheduler); c.Config != "aaa" {
		t.Fatalf("started with config %q, want aaa", c.Config)
	}
	// The same configuration again (a later Up, new epoch): nothing happens.
	old := h.run.current[Scheduler]
	h.sup.enableConfig(Scheduler, 2, "aaa")
	h.after(0)
	if h.run.current[Scheduler] != old || len(old.signals) != 0 {
		t.Fatalf("same configuration: process replaced or signalled (%v)", old.signals)
	}
	h.sup.enableConfig(Scheduler, 3, "bbb")
	if fmt.Sprint(old.signals) != "[terminated]" {
		t.Fatalf("old process got %v, want SIGTERM", old.signals)
	}
	h.wantState(Scheduler, StateStarting)
	h.after(0)
	starts := h.run.startsOf(Scheduler)
	if len(starts) != 2 || starts[1].why != "start with configuration bbb" {
		t.Fatalf("starts %+v", starts)
	}
	h.after(DefaultPolicy.StartingProbe)
	h.wantState(Scheduler, StateReady)
	if c := h.member(Scheduler); c.Config != "bbb" || c.Restarts != 0 || c.Epoch != 3 || len(h.sup.members[Scheduler].history) != 0 {
		t.Fatalf("after the new configuration: %+v, crash history %v", c, h.sup.members[Scheduler].history)
	}
	// A crash restarts it with the configuration it has.
	h.run.current[Scheduler].die(Exit{Code: 1})
	h.after(0)
	h.after(DefaultPolicy.InitialBackoff)
	if c := h.member(Scheduler); c.Config != "bbb" || c.Restarts != 1 {
		t.Fatalf("after a crash: %+v", c)
	}
}

// A process adopted from a supervisor that died is restarted when it started with another
// configuration (or one the supervisor cannot know), and kept when it started with this one.
func TestReconfigureAdopted(t *testing.T) {
	for _, tc := range []struct {
		name, carried string
		restart       bool
	}{{"same", "aaa", false}, {"other", "zzz", true}, {"unknown", "", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Scheduler)
			running := &fakeProc{p: 77, ch: make(chan struct{})}
			h.run.adoptable[Scheduler] = running
			if tc.carried != "" {
				h.sup.members[Scheduler] = &member{spec: h.sup.specs[Scheduler], everStarted: true,
					h: ComponentHealth{Name: Scheduler, State: StateReady, Config: tc.carried}}
			}
			h.sup.enableConfig(Scheduler, 1, "aaa")
			h.after(0)
			restarted := len(h.run.startsOf(Scheduler)) == 1
			if restarted != tc.restart || (len(running.signals) > 0) != tc.restart {
				t.Fatalf("restarted %v (signals %v), want %v", restarted, running.signals, tc.restart)
			}
			if c := h.member(Scheduler); c.Config != map[bool]string{true: "aaa", false: tc.carried}[tc.restart] || c.Restarts != 0 {
				t.Fatalf("%+v", c)
			}
		})
	}
}

// Up asks for a new configuration with a new epoch, so it awaits the restarted process.
func TestDesiredConfig(t *testing.T) {
	st := &State{Name: "test", Dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(st.Dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		config string
		epoch  int
	}{{"aaa", 1}, {"aaa", 1}, {"", 1}, {"bbb", 2}, {"bbb", 2}} {
		epoch, err := st.enableConfig(Scheduler, tc.config)
		if err != nil || epoch != tc.epoch {
			t.Fatalf("step %d (%q): epoch %d, %v; want %d", i, tc.config, epoch, err, tc.epoch)
		}
	}
	d, _, err := readDesired(st.Dir)
	if err != nil || len(d.Components) != 1 || d.Components[0].Config != "bbb" {
		t.Fatalf("desired %+v, %v", d, err)
	}
}

func TestLivenessProbeRestarts(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ignoresQuit  bool
		wantSignals  []syscall.Signal
		wantExitSig  string
		extraToDeath time.Duration
	}{
		{name: "exits on SIGQUIT", wantSignals: []syscall.Signal{syscall.SIGQUIT}, wantExitSig: ""},
		{name: "killed after the grace", ignoresQuit: true, wantSignals: []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL},
			wantExitSig: "SIGKILL", extraToDeath: DefaultPolicy.QuitGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "kwok")
			var liveErr error
			sp := h.sup.specs["kwok"]
			sp.live = func(context.Context) error { h.mu.Lock(); defer h.mu.Unlock(); return liveErr }
			sp.liveDelay = 20 * time.Second
			h.sup.specs["kwok"] = sp
			setLive := func(err error) { h.mu.Lock(); defer h.mu.Unlock(); liveErr = err }

			setLive(errors.New("no lease"))
			h.up("kwok")
			first := h.run.current["kwok"]
			first.ignore, first.termed = tc.ignoresQuit, make(chan struct{})
			// Failures before the delay do not count: the probe has not run.
			h.after(sp.liveDelay - time.Second)
			if len(first.signals) != 0 || h.member("kwok").Restarts != 0 {
				t.Fatalf("signalled %v before the liveness delay", first.signals)
			}
			// Two failures, then a pass: the count starts over.
			h.after(time.Second)
			h.after(DefaultPolicy.LivenessPeriod)
			setLive(nil)
			h.after(DefaultPolicy.LivenessPeriod)
			setLive(errors.New("no lease"))
			h.after(DefaultPolicy.LivenessPeriod)
			h.after(DefaultPolicy.LivenessPeriod)
			if len(first.signals) != 0 {
				t.Fatalf("signalled %v after two failures in a row", first.signals)
			}
			h.after(DefaultPolicy.LivenessPeriod) // the third in a row
			if len(first.signals) != 1 || first.signals[0] != syscall.SIGQUIT {
				t.Fatalf("signals %v after three failures in a row, want SIGQUIT", first.signals)
			}
			if tc.extraToDeath > 0 {
				h.after(tc.extraToDeath)
			}
			h.after(0)
			if !slices.Equal(first.signals, tc.wantSignals) {
				t.Fatalf("signals %v, want %v", first.signals, tc.wantSignals)
			}
			c := h.member("kwok")
			if c.LastExit == nil || c.LastExit.Signal != tc.wantExitSig || !strings.Contains(c.LastExit.Reason, "liveness probe failed 3 times in a row: no lease") {
				t.Fatalf("last exit %+v, want signal %q with the liveness reason", c.LastExit, tc.wantExitSig)
			}
			// The code or signal and the reason, both.
			want := "exit code 2 (liveness probe failed 3 times in a row: no lease)"
			if tc.wantExitSig != "" {
				want = "signal " + tc.wantExitSig + " (liveness probe failed 3 times in a row: no lease)"
			}
			if got := c.LastExit.String(); !strings.HasPrefix(got, want) {
				t.Errorf("last exit %q, want it to start %q", got, want)
			}
			h.awaitStart("kwok")
			if c := h.member("kwok"); c.Restarts != 1 || h.run.current["kwok"] == first {
				t.Fatalf("after the liveness kill: restarts %d, same process %v", c.Restarts, h.run.current["kwok"] == first)
			}
			// The new process gets its own delay before its probe counts.
			h.after(DefaultPolicy.StartingProbe)
			h.wantState("kwok", StateReady)
			h.after(sp.liveDelay / 2)
			if s := h.run.current["kwok"].signals; len(s) != 0 {
				t.Fatalf("new process signalled %v within its liveness delay", s)
			}
			if !strings.Contains(h.log.String(), "liveness probe failed (3 of 3): no lease") {
				t.Fatalf("supervisor log has no liveness failure:\n%s", h.log.String())
			}
		})
	}
}
