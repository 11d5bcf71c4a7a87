package localcluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ComponentState is where a supervised component is in its life.
type ComponentState string

const (
	// StateStarting: the process runs and has not passed its readiness probe since it started.
	StateStarting ComponentState = "starting"
	// StateReady: the process runs and its readiness probe passes.
	StateReady ComponentState = "ready"
	// StateUnready: the process was ready and its probe has failed FailureThreshold times in a row.
	StateUnready ComponentState = "unready"
	// StateRestarting: the process exited and waits for its backoff delay (or for the components
	// it depends on) before it is started again.
	StateRestarting ComponentState = "restarting"
	// StateCrashLooping: the process kept exiting (the crash-loop rule of Policy); it stays down
	// until `cluster up` asks for it again.
	StateCrashLooping ComponentState = "crash-looping"
	// StateStopped: the component was stopped on purpose (`cluster down`).
	StateStopped ComponentState = "stopped"
)

// Exit is how a component's process ended.
type Exit struct {
	Time time.Time `json:"time"`
	// Code is the exit code, -1 when a signal ended the process or the code is unknown.
	Code int `json:"code"`
	// Signal is the signal that ended the process (e.g. SIGKILL).
	Signal string `json:"signal,omitempty"`
	// Reason says why the code is unknown (the start failed, or the process was adopted from an
	// earlier supervisor and could not be waited for) or why the supervisor ended the process
	// (its liveness probe failed).
	Reason string `json:"reason,omitempty"`
	// RanSeconds is how long the process ran.
	RanSeconds float64 `json:"ranSeconds"`
}

func (e Exit) String() string {
	var what string
	switch {
	case e.Signal != "":
		what = "signal " + e.Signal
	case e.Code >= 0:
		what = "exit code " + strconv.Itoa(e.Code)
	}
	switch {
	case what == "":
		what = e.Reason
	case e.Reason != "":
		what += " (" + e.Reason + ")"
	}
	return fmt.Sprintf("%s at %s (ran %s)", what, e.Time.Local().Format("15:04:05"), roundDuration(time.Duration(e.RanSeconds*float64(time.Second))))
}

func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// ComponentHealth is one component as its supervisor sees it.
type ComponentHealth struct {
	Name  string         `json:"name"`
	State ComponentState `json:"state"`
	PID   int            `json:"pid,omitempty"`
	// Restarts counts every start after the first since `cluster up` (a supervisor that replaces
	// one that died carries the count on).
	Restarts    int       `json:"restarts"`
	Started     time.Time `json:"started,omitzero"`     // when the current process started
	ReadySince  time.Time `json:"readySince,omitzero"`  // when it last became ready
	LastRestart time.Time `json:"lastRestart,omitzero"` // when it was last restarted
	LastExit    *Exit     `json:"lastExit,omitempty"`
	// Message is the last failed probe, what a restart waits for, or why it crash-loops.
	Message string `json:"message,omitempty"`
	// Epoch is the request of Up this state answers: Up raises it to start a crash-looping or
	// stopped component over, and waits for the supervisor to report on the new epoch.
	Epoch int `json:"epoch"`
	// Config is the digest of the configuration file the process started with, for a component
	// that reads one only at start (kube-scheduler); the supervisor restarts it for a new one.
	Config string `json:"config,omitempty"`
}

// SupervisorInfo identifies the process that supervises a cluster.
type SupervisorInfo struct {
	PID int `json:"pid"`
	// StartTicks is the process's start time in /proc/<pid>/stat, so a recycled PID never counts.
	StartTicks uint64    `json:"startTicks"`
	Started    time.Time `json:"started"`
	// InProcess: the supervisor runs inside the program that called Up (a test binary), not as
	// the `kueuelab cluster supervise` daemon.
	InProcess bool `json:"inProcess,omitempty"`
	// Exited: the supervisor stopped its components and returned.
	Exited bool `json:"exited,omitempty"`
	// Alive is computed by ReadHealth: the process still runs and has not exited.
	Alive bool `json:"-"`
}

// Health is the supervisor's status file (status.json in the cluster's state dir), rewritten
// atomically on every change of state.
type Health struct {
	Cluster    string            `json:"cluster"`
	Supervisor SupervisorInfo    `json:"supervisor"`
	Updated    time.Time         `json:"updated"`
	Components []ComponentHealth `json:"components"`
	// Policy is the restart policy in force, for readers that explain a crash loop.
	Policy PolicySummary `json:"policy"`
}

// PolicySummary is the part of Policy a reader needs to explain a crash loop.
type PolicySummary struct {
	CrashLoopRestarts      int     `json:"crashLoopRestarts"`
	CrashLoopWindowSeconds float64 `json:"crashLoopWindowSeconds"`
}

// statusFile is where the supervisor writes Health.
func statusFile(dir string) string { return filepath.Join(dir, "status.json") }

// ErrNoSupervisor is returned by ReadHealth when no supervisor ever ran for the cluster.
var ErrNoSupervisor = errors.New("no supervisor status (the cluster was never brought up by this version)")

// ReadHealth reads the status file of the cluster whose state dir is dir. It is one small file
// read and one /proc lookup, cheap enough to poll every 100 ms.
func ReadHealth(dir string) (*Health, error) {
	b, err := os.ReadFile(statusFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoSupervisor
	}
	if err != nil {
		return nil, err
	}
	var h Health
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", statusFile(dir), err)
	}
	h.Supervisor.Alive = !h.Supervisor.Exited && h.Supervisor.PID > 0 && procStartTicks(h.Supervisor.PID) == h.Supervisor.StartTicks
	return &h, nil
}

// Health reads the cluster's supervisor status.
func (c *Cluster) Health() (*Health, error) { return ReadHealth(c.State.Dir) }

// Component returns the named component's health.
func (h *Health) Component(name string) (ComponentHealth, bool) {
	for _, c := range h.Components {
		if c.Name == name {
			return c, true
		}
	}
	return ComponentHealth{}, false
}

// Ready reports whether the supervisor runs and every component it supervises is ready.
func (h *Health) Ready() bool { return h.Supervisor.Alive && len(h.NotReady()) == 0 }

// NotReady lists the components that are not ready, in start order.
func (h *Health) NotReady() []ComponentHealth {
	var out []ComponentHealth
	for _, c := range h.Components {
		if c.State != StateReady {
			out = append(out, c)
		}
	}
	return out
}

// Restarts is the sum of every component's restarts.
func (h *Health) Restarts() int {
	n := 0
	for _, c := range h.Components {
		n += c.Restarts
	}
	return n
}

// CrashLoopError names a crash-looping component and carries the end of its log.
type CrashLoopError struct {
	Component ComponentHealth
	Policy    PolicySummary
	Log       string // the component's log file
	Tail      string // its last lines
}

func (e *CrashLoopError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is crash-looping (%d restarts within %s", e.Component.Name, e.Policy.CrashLoopRestarts,
		time.Duration(e.Policy.CrashLoopWindowSeconds*float64(time.Second)))
	if e.Component.LastExit != nil {
		fmt.Fprintf(&b, ", last exit: %s", e.Component.LastExit)
	}
	fmt.Fprintf(&b, ")\n--- last lines of %s ---\n%s", e.Log, e.Tail)
	return b.String()
}

// CrashLooping returns a *CrashLoopError for the first crash-looping component, with the last
// lines of its log, or nil when none crash-loops. dir is the cluster's state dir.
func (h *Health) CrashLooping(dir string, lines int) error {
	for _, c := range h.Components {
		if c.State == StateCrashLooping {
			log := logPath(dir, c.Name)
			return &CrashLoopError{Component: c, Policy: h.Policy, Log: log, Tail: LogTail(log, lines)}
		}
	}
	return nil
}

func logPath(dir, name string) string { return filepath.Join(dir, "logs", name+".log") }

// ComponentLog is the path of a component's log in the cluster whose state dir is dir.
func ComponentLog(dir, component string) string { return logPath(dir, component) }

// tailBytes bounds how much of a log LogTail reads: logs of a long replay reach hundreds of MB.
const tailBytes = 256 << 10

// lastLines is the last n lines of the log at path, headed by its path, for an error's text.
func lastLines(path string, n int) string {
	return fmt.Sprintf("\n--- last lines of %s ---\n%s", path, LogTail(path, n))
}

// LogTail returns the last n lines of the file at path (an error's text when it cannot be read).
func LogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(st.Size()-tailBytes, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err.Error()
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	if off > 0 { // drop the partial first line
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// procStartTicks is field 22 of /proc/<pid>/stat (start time in clock ticks after boot), 0 when
// the process is gone or a zombie.
func procStartTicks(pid int) uint64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(st[i+1:]))
	// f[0] is field 3 (state); start time is field 22.
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0
	}
	return v
}
