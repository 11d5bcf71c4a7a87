package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kueuelab/kueuelab/internal/atomicfile"
	"k8s.io/utils/clock"
)

// Policy is how the supervisor restarts components. It follows the kubelet's handling of static
// pods (restart every exited process with a doubling delay, readiness from a probe) with delays
// sized for a local replay, where a held trace clock turns every second of outage into wall time:
// the kubelet's 10 s doubling to 5 min would make a Kueue crash cost minutes.
type Policy struct {
	// InitialBackoff is the delay before the first restart, and before every restart of a
	// process that had run at least BackoffReset; each further restart doubles it.
	InitialBackoff time.Duration
	// MaxBackoff caps the doubling delay.
	MaxBackoff time.Duration
	// BackoffReset: a process that ran this long before exiting restarts after InitialBackoff.
	BackoffReset time.Duration
	// The crash-loop rule: a component that exits after CrashLoopRestarts restarts within
	// CrashLoopWindow is marked crash-looping and not started again.
	CrashLoopRestarts int
	CrashLoopWindow   time.Duration
	// StartingProbe is the readiness probe's period until the process is ready (and while it is
	// unready); ReadyProbe its period while the process is ready.
	StartingProbe, ReadyProbe time.Duration
	// FailureThreshold is how many probes in a row must fail to make a ready component unready.
	FailureThreshold int
	// LivenessPeriod is the liveness probe's period, from the component's liveness delay after
	// each start; LivenessFailureThreshold failures in a row restart the process, as the kubelet
	// restarts a container whose liveness probe fails.
	LivenessPeriod           time.Duration
	LivenessFailureThreshold int
	// QuitGrace is how long a process that failed its liveness probe gets between SIGQUIT and
	// SIGKILL: a Go process writes its goroutine dump and exits at once, so one still there is
	// stuck beyond answering.
	QuitGrace time.Duration
	// StopGrace is how long a stopped process gets between SIGTERM and SIGKILL.
	StopGrace time.Duration
}

// DefaultPolicy: restarts after 200 ms, 400 ms, 800 ms, 1.6 s, 3.2 s, … up to 30 s; a component
// that exits again after five restarts within two minutes is crash-looping (with a process that
// dies at once, that is decided about 7 s after the first exit). Probes every 200 ms until ready,
// then every second; two failed probes in a row make a ready component unready. A component with
// a liveness probe is probed every 5 s after its delay and restarted after three failures in a row.
var DefaultPolicy = Policy{
	InitialBackoff:    200 * time.Millisecond,
	MaxBackoff:        30 * time.Second,
	BackoffReset:      time.Minute,
	CrashLoopRestarts: 5,
	CrashLoopWindow:   2 * time.Minute,
	StartingProbe:     200 * time.Millisecond,
	ReadyProbe:        time.Second,
	FailureThreshold:  2,
	StopGrace:         15 * time.Second,

	LivenessPeriod:           5 * time.Second,
	LivenessFailureThreshold: 3,
	QuitGrace:                5 * time.Second,
}

// backoff is the delay before the n-th restart since the last reset (n ≥ 1).
func (p Policy) backoff(n int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

func (p Policy) summary() PolicySummary {
	return PolicySummary{CrashLoopRestarts: p.CrashLoopRestarts, CrashLoopWindowSeconds: p.CrashLoopWindow.Seconds()}
}

// tickInterval is how often the supervisor looks for exits, due restarts and due probes.
const tickInterval = 100 * time.Millisecond

// procRunner starts component processes; the real one execs them, unit tests fake them.
type procRunner interface {
	// start runs p; why is logged to the component's log ahead of its output.
	start(p process, why string) (proc, error)
	// adopt returns a process of p's binary an earlier supervisor started, if one still runs.
	adopt(p process) (proc, bool)
}

// proc is one running component process.
type proc interface {
	pid() int
	done() <-chan struct{} // closed when the process has exited
	exit() Exit            // how it exited (Code, Signal, Reason); valid once done is closed
	signal(syscall.Signal) error
}

// member is one supervised component.
type member struct {
	spec        spec
	h           ComponentHealth
	p           proc
	everStarted bool        // a start of this component from now on is a restart
	startAt     time.Time   // when to (re)start it; zero when not scheduled
	consecutive int         // restarts since the backoff was last reset
	history     []time.Time // restart times within the crash-loop window
	nextProbe   time.Time
	probing     bool
	failures    int // probes failed in a row
	// The liveness probe's schedule and failures in a row; killedFor is why the supervisor
	// ended the running process (recorded as its exit's reason), killBy when SIGKILL follows.
	nextLive     time.Time
	liveProbing  bool
	liveFailures int
	killedFor    string
	killBy       time.Time
	// config is the configuration digest Up asks for (desiredComponent.Config); h.Config is the
	// one the running process started with.
	config string
	// reconfigure: the process was stopped to start with a new configuration. That start is
	// not a restart: it is not counted and spends no crash-loop budget.
	reconfigure bool
}

type probeResult struct {
	name string
	p    proc
	err  error
	live bool // a liveness probe's result, not a readiness probe's
}

// Supervisor keeps a cluster's components running: it starts the components the desired file
// (run/desired.json, written by Up) names, restarts each one that exits with Policy's backoff,
// probes readiness, applies the crash-loop rule, and writes status.json on every change. One
// supervisor runs per cluster (run/supervisor.lock), either as the `kueuelab cluster supervise`
// daemon or inside the program that called Up.
type Supervisor struct {
	st     *State
	policy Policy
	clock  clock.WithTicker
	run    procRunner
	specs  map[string]spec
	// preStart runs before a component's process is started; an error delays the start (it is
	// retried after InitialBackoff) without counting as a crash.
	preStart map[string]func(context.Context) error
	log      io.Writer

	self    SupervisorInfo
	members map[string]*member
	order   []string // enabled components, in the order they were enabled (start order)
	probes  chan probeResult
	wake    chan struct{} // a child exited: look now rather than at the next tick
	desired []byte        // the desired file as last read
	written []byte        // the status as last written, without its Updated stamp
}

// newSupervisor builds a supervisor for s's components; it supervises nothing until enabled.
func newSupervisor(s *State, specs map[string]spec, policy Policy, clk clock.WithTicker, run procRunner, log io.Writer) *Supervisor {
	sup := &Supervisor{st: s, policy: policy, clock: clk, run: run, specs: specs, log: log,
		members: map[string]*member{}, probes: make(chan probeResult, 64), wake: make(chan struct{}, 1)}
	sup.carryOver()
	return sup
}

// carryOver keeps the restart counts and last exits of an earlier supervisor of the cluster that
// died without stopping its components: they are the same components' lives going on. After a
// clean `cluster down` the counts start again from zero.
func (sup *Supervisor) carryOver() {
	h, err := ReadHealth(sup.st.Dir)
	if err != nil || h.Supervisor.Exited {
		return
	}
	for _, c := range h.Components {
		if _, ok := sup.specs[c.Name]; !ok || c.State == StateStopped {
			continue
		}
		sup.members[c.Name] = &member{spec: sup.specs[c.Name], everStarted: true, h: ComponentHealth{Name: c.Name,
			State: c.State, Restarts: c.Restarts, LastRestart: c.LastRestart, LastExit: c.LastExit, Config: c.Config}}
	}
}

func (sup *Supervisor) logf(format string, args ...any) {
	fmt.Fprintf(sup.log, "%s %s\n", sup.clock.Now().Format("2006-01-02T15:04:05.000Z07:00"), fmt.Sprintf(format, args...))
}

// enable asks for name to run. A component enabled again with a new epoch (Up run again) leaves
// crash-looping or stopped and starts over with a fresh crash-loop history.
func (sup *Supervisor) enable(name string, epoch int) { sup.enableConfig(name, epoch, "") }

// enableConfig is enable with the digest of the component's configuration file (empty: not
// tracked). A running process that started with another configuration is restarted with it.
func (sup *Supervisor) enableConfig(name string, epoch int, config string) {
	now := sup.clock.Now()
	m, known := sup.members[name]
	if !known {
		sp, ok := sup.specs[name]
		if !ok {
			sup.logf("%s: not a component of this cluster; ignored", name)
			return
		}
		m = &member{spec: sp, h: ComponentHealth{Name: name}}
		sup.members[name] = m
	}
	if config != "" {
		m.config = config
	}
	if !sup.enabled(name) {
		sup.order = append(sup.order, name)
		m.h.Epoch = epoch
		if p, ok := sup.run.adopt(m.spec.process); ok {
			sup.logf("%s: adopted running process %d", name, p.pid())
			m.p, m.everStarted = p, true
			m.h.State, m.h.PID, m.h.Started, m.h.Message = StateStarting, p.pid(), now, "adopted from an earlier supervisor"
			m.nextProbe = now
			m.resetLiveness(now)
			sup.reconfigure(m)
			return
		}
		// A component carried over from a supervisor that died is restarted (everStarted), not started.
		m.h.State, m.h.PID, m.h.Message = StateStarting, 0, ""
		m.startAt = now
		return
	}
	if epoch == m.h.Epoch {
		return
	}
	m.h.Epoch = epoch
	if m.h.State == StateCrashLooping || m.h.State == StateStopped {
		sup.logf("%s: enabled again; leaves %s", name, m.h.State)
		m.history, m.consecutive = nil, 0
		m.h.State, m.h.Message = StateRestarting, ""
		m.startAt = now
		return
	}
	sup.reconfigure(m)
}

// reconfigure stops a running member whose process started with another configuration than the
// one Up asks for, and starts it again at once: the component reads its configuration file only
// when it starts (kube-scheduler), as the kubelet restarts a static pod whose manifest changed.
func (sup *Supervisor) reconfigure(m *member) {
	if m.p == nil || m.config == "" || m.config == m.h.Config {
		return
	}
	was := m.h.Config
	if was == "" {
		was = "an unknown one"
	}
	sup.logf("%s: configuration %s asked for, pid %d started with %s: stopping it", m.h.Name, m.config, m.p.pid(), was)
	sup.stopMember(m)
	m.reconfigure = true
	m.h.State, m.h.PID, m.h.ReadySince = StateStarting, 0, time.Time{}
	m.h.Message = "starting with configuration " + m.config
	m.startAt = sup.clock.Now()
}

func (sup *Supervisor) enabled(name string) bool {
	for _, n := range sup.order {
		if n == name {
			return true
		}
	}
	return false
}

// dependency is the component that must be ready before name is (re)started: etcd for the API
// server, the API server for everything else. Restarting a controller while the API server is
// down would only burn its crash-loop budget.
func dependency(name string) string {
	switch name {
	case Etcd:
		return ""
	case APIServer:
		return Etcd
	default:
		return APIServer
	}
}

func (sup *Supervisor) depReady(name string) (string, bool) {
	dep := dependency(name)
	if dep == "" || !sup.enabled(dep) {
		return "", true
	}
	return dep, sup.members[dep].h.State == StateReady
}

// tick looks once for exits, due (re)starts and due probes.
func (sup *Supervisor) tick(ctx context.Context) {
	for _, name := range sup.order {
		m := sup.members[name]
		if m.p != nil {
			select {
			case <-m.p.done():
				sup.exited(m, m.p.exit())
			default:
			}
		}
		now := sup.clock.Now()
		if m.p == nil && !m.startAt.IsZero() && !now.Before(m.startAt) {
			if dep, ok := sup.depReady(name); !ok {
				m.h.Message = "waiting for " + dep + " to be ready"
			} else {
				sup.startMember(ctx, m)
			}
		}
		if m.p != nil && !m.probing && !now.Before(m.nextProbe) {
			m.probing = true
			p, probe := m.p, m.spec.health
			go func() {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				sup.probes <- probeResult{name: name, p: p, err: probe(pctx)}
			}()
		}
		if m.p != nil && m.spec.live != nil && m.killedFor == "" && !m.liveProbing && !now.Before(m.nextLive) {
			m.liveProbing = true
			p, probe := m.p, m.spec.live
			go func() {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				sup.probes <- probeResult{name: name, p: p, err: probe(pctx), live: true}
			}()
		}
		if m.p != nil && !m.killBy.IsZero() && !now.Before(m.killBy) {
			m.killBy = time.Time{}
			sup.logf("%s: pid %d still running %s after SIGQUIT; SIGKILL", name, m.p.pid(), sup.policy.QuitGrace)
			if err := m.p.signal(syscall.SIGKILL); err != nil {
				sup.logf("%s: SIGKILL %d: %v", name, m.p.pid(), err)
			}
		}
	}
}

// kill ends a running member that failed its liveness probe: SIGQUIT first, so that a Go
// component writes every goroutine's stack to its log before it exits (what was it stuck on?),
// SIGKILL after QuitGrace if it is still there. The exit is then handled like any other.
func (sup *Supervisor) kill(m *member, why string) {
	sup.logf("%s: %s; SIGQUIT (goroutine dump in its log), then a restart", m.h.Name, why)
	m.killedFor = why
	m.killBy = sup.clock.Now().Add(sup.policy.QuitGrace)
	if err := m.p.signal(syscall.SIGQUIT); err != nil {
		sup.logf("%s: SIGQUIT %d: %v", m.h.Name, m.p.pid(), err)
	}
}

// startMember runs the member's pre-start hook and starts its process.
func (sup *Supervisor) startMember(ctx context.Context, m *member) {
	name := m.h.Name
	if hook := sup.preStart[name]; hook != nil {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := hook(hctx)
		cancel()
		if err != nil {
			m.h.Message = "before start: " + err.Error()
			m.startAt = sup.clock.Now().Add(sup.policy.InitialBackoff)
			sup.logf("%s: %s (retrying)", name, m.h.Message)
			return
		}
	}
	now := sup.clock.Now()
	why := "start"
	if m.reconfigure {
		why = "start with configuration " + m.config
	} else if m.everStarted {
		m.h.Restarts++
		m.h.LastRestart = now
		m.history = append(m.history, now)
		why = fmt.Sprintf("restart %d", m.h.Restarts)
		if m.h.LastExit != nil {
			why += " after " + m.h.LastExit.String()
		}
	}
	m.everStarted, m.reconfigure = true, false
	m.startAt = time.Time{}
	m.h.Started, m.h.Config = now, m.config
	p, err := sup.run.start(m.spec.process, why)
	if err != nil {
		sup.logf("%s: %s failed: %v", name, why, err)
		sup.exited(m, Exit{Code: -1, Reason: "start failed: " + err.Error()})
		return
	}
	sup.logf("%s: %s (pid %d)", name, why, p.pid())
	m.p = p
	m.h.State, m.h.PID, m.h.ReadySince, m.h.Message = StateStarting, p.pid(), time.Time{}, ""
	m.failures = 0
	m.nextProbe = now.Add(sup.policy.StartingProbe)
	m.resetLiveness(now)
}

// resetLiveness starts a new process's liveness schedule: its first probe after the spec's delay.
func (m *member) resetLiveness(now time.Time) {
	m.nextLive = now.Add(m.spec.liveDelay)
	m.liveProbing, m.liveFailures, m.killedFor, m.killBy = false, 0, "", time.Time{}
}

// exited records an exit and schedules the restart, or marks the member crash-looping.
func (sup *Supervisor) exited(m *member, e Exit) {
	now := sup.clock.Now()
	e.Time = now
	e.RanSeconds = now.Sub(m.h.Started).Seconds()
	if m.killedFor != "" {
		if e.Reason != "" {
			e.Reason = m.killedFor + "; " + e.Reason
		} else {
			e.Reason = m.killedFor
		}
	}
	m.p, m.probing, m.liveProbing, m.killedFor, m.killBy = nil, false, false, "", time.Time{}
	m.h.PID, m.h.ReadySince = 0, time.Time{}
	m.h.LastExit = &e
	if now.Sub(m.h.Started) >= sup.policy.BackoffReset {
		m.consecutive = 0
	}
	cut := now.Add(-sup.policy.CrashLoopWindow)
	kept := m.history[:0]
	for _, t := range m.history {
		if t.After(cut) {
			kept = append(kept, t)
		}
	}
	m.history = kept
	if len(m.history) >= sup.policy.CrashLoopRestarts {
		m.h.State = StateCrashLooping
		m.startAt = time.Time{}
		m.h.Message = fmt.Sprintf("exited after %d restarts within %s; not restarted (`kueuelab cluster up` starts it again)",
			len(m.history), sup.policy.CrashLoopWindow)
		sup.logf("%s: %s: crash-looping, %s", m.h.Name, e, m.h.Message)
		return
	}
	m.consecutive++
	d := sup.policy.backoff(m.consecutive)
	m.startAt = now.Add(d)
	m.h.State = StateRestarting
	m.h.Message = fmt.Sprintf("restarting in %s", d)
	sup.logf("%s: %s; restarting in %s", m.h.Name, e, d)
}

// probed applies a readiness probe's result.
func (sup *Supervisor) probed(r probeResult) {
	m := sup.members[r.name]
	if m == nil {
		return
	}
	if m.p != r.p { // a probe of a process that has since exited
		return
	}
	now := sup.clock.Now()
	if r.live {
		m.liveProbing = false
		m.nextLive = now.Add(sup.policy.LivenessPeriod)
		if r.err == nil {
			m.liveFailures = 0
			return
		}
		m.liveFailures++
		sup.logf("%s: liveness probe failed (%d of %d): %v", r.name, m.liveFailures, sup.policy.LivenessFailureThreshold, r.err)
		if m.liveFailures >= sup.policy.LivenessFailureThreshold && m.killedFor == "" {
			sup.kill(m, fmt.Sprintf("liveness probe failed %d times in a row: %v", m.liveFailures, r.err))
		}
		return
	}
	m.probing = false
	if r.err == nil {
		if m.h.State != StateReady {
			sup.logf("%s: ready (pid %d, %s after start)", r.name, m.h.PID, roundDuration(now.Sub(m.h.Started)))
			m.h.State, m.h.ReadySince = StateReady, now
		}
		m.h.Message, m.failures = "", 0
		m.nextProbe = now.Add(sup.policy.ReadyProbe)
		return
	}
	m.failures++
	m.h.Message = r.err.Error()
	if m.h.State == StateReady && m.failures >= sup.policy.FailureThreshold {
		sup.logf("%s: unready: %v", r.name, r.err)
		m.h.State = StateUnready
	}
	period := sup.policy.ReadyProbe
	if m.h.State != StateReady {
		period = sup.policy.StartingProbe
	}
	m.nextProbe = now.Add(period)
}

// status is the Health the supervisor reports now.
func (sup *Supervisor) status() Health {
	h := Health{Cluster: sup.st.Name, Supervisor: sup.self, Policy: sup.policy.summary(), Components: []ComponentHealth{}}
	for _, name := range sup.order {
		h.Components = append(h.Components, sup.members[name].h)
	}
	return h
}

// writeStatus writes status.json (temp file and rename, so readers never see half of it) when
// anything but the time stamp changed.
func (sup *Supervisor) writeStatus() error {
	h := sup.status()
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if string(b) == string(sup.written) {
		return nil
	}
	h.Updated = sup.clock.Now()
	out, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(statusFile(sup.st.Dir), append(out, '\n')); err != nil {
		return err
	}
	sup.written = b
	return nil
}

// desiredState is run/desired.json: what Up asks the supervisor to run, and Down's request to
// stop. Epoch rises each time Up asks for a component that is crash-looping or stopped.
type desiredState struct {
	Components []desiredComponent `json:"components"`
	Shutdown   bool               `json:"shutdown,omitempty"`
}

type desiredComponent struct {
	Name  string `json:"name"`
	Epoch int    `json:"epoch"`
	// Config is the digest of the configuration file the component reads only when it starts
	// (kube-scheduler); empty when the supervisor need not track it.
	Config string `json:"config,omitempty"`
}

func desiredFile(dir string) string { return filepath.Join(dir, "run", "desired.json") }

func readDesired(dir string) (desiredState, []byte, error) {
	var d desiredState
	b, err := os.ReadFile(desiredFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return d, nil, nil
	}
	if err != nil {
		return d, nil, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, nil, fmt.Errorf("%s: %w", desiredFile(dir), err)
	}
	return d, b, nil
}

func writeDesired(dir string, d desiredState) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(desiredFile(dir), append(b, '\n'))
}

// syncDesired applies the desired file when it changed; it reports a shutdown request.
func (sup *Supervisor) syncDesired() (shutdown bool, err error) {
	d, b, err := readDesired(sup.st.Dir)
	if err != nil {
		return false, err
	}
	if string(b) == string(sup.desired) {
		return d.Shutdown, nil
	}
	sup.desired = b
	for _, c := range d.Components {
		sup.enableConfig(c.Name, c.Epoch, c.Config)
	}
	return d.Shutdown, nil
}

// Run supervises until ctx ends or Down asks for a shutdown, then stops every component in
// reverse start order and writes the final status.
func (sup *Supervisor) Run(ctx context.Context) error {
	sup.logf("supervisor %d for cluster %s started", sup.self.PID, sup.st.Name)
	ticker := sup.clock.NewTicker(tickInterval)
	defer ticker.Stop()
	var runErr error
	lastErr := ""
loop:
	for {
		shutdown, err := sup.syncDesired()
		if err != nil && err.Error() != lastErr { // logged once, not every tick
			sup.logf("%v", err)
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		if shutdown {
			sup.logf("shutdown requested")
			break
		}
		sup.tick(ctx)
		if err := sup.writeStatus(); err != nil {
			sup.logf("write status: %v", err)
		}
		select {
		case r := <-sup.probes:
			sup.probed(r)
			for len(sup.probes) > 0 {
				sup.probed(<-sup.probes)
			}
		case <-sup.wake:
		case <-ticker.C():
		case <-ctx.Done():
			sup.logf("supervisor stopping: %v", context.Cause(ctx))
			break loop
		}
	}
	sup.stopAll()
	sup.self.Exited = true
	if err := sup.writeStatus(); err != nil {
		runErr = err
	}
	sup.logf("supervisor exits")
	return runErr
}

// stopAll stops every running component in reverse start order: SIGTERM, then SIGKILL after
// StopGrace. Only processes this supervisor started or adopted (by PID, checked) are signalled.
func (sup *Supervisor) stopAll() {
	for i := len(sup.order) - 1; i >= 0; i-- {
		m := sup.members[sup.order[i]]
		m.startAt = time.Time{}
		if m.p != nil {
			sup.stopMember(m)
		}
		m.h.State, m.h.PID, m.h.ReadySince, m.h.Message = StateStopped, 0, time.Time{}, ""
		os.Remove(sup.st.pidFile(m.h.Name))
		if err := sup.writeStatus(); err != nil {
			sup.logf("write status: %v", err)
		}
	}
}

func (sup *Supervisor) stopMember(m *member) {
	p := m.p
	m.p, m.probing = nil, false
	m.resetLiveness(sup.clock.Now())
	if err := p.signal(syscall.SIGTERM); err != nil {
		sup.logf("%s: SIGTERM %d: %v", m.h.Name, p.pid(), err)
	}
	if sup.awaitExit(p, sup.policy.StopGrace) {
		sup.logf("%s: stopped (pid %d)", m.h.Name, p.pid())
		return
	}
	if err := p.signal(syscall.SIGKILL); err != nil {
		sup.logf("%s: SIGKILL %d: %v", m.h.Name, p.pid(), err)
	}
	if sup.awaitExit(p, 5*time.Second) {
		sup.logf("%s: killed after %s (pid %d)", m.h.Name, sup.policy.StopGrace, p.pid())
		return
	}
	sup.logf("%s: pid %d still alive after SIGKILL", m.h.Name, p.pid())
}

// awaitExit waits up to d for p to exit.
func (sup *Supervisor) awaitExit(p proc, d time.Duration) bool {
	t := sup.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done():
		return true
	case <-t.C():
		return false
	}
}
