package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ComponentStatus is one row of `cluster status`: the supervisor's view of a component, its
// resident memory, and (without a live supervisor) what a probe finds now.
type ComponentStatus struct {
	ComponentHealth
	RSSKB int64
}

// Status reports every component of cluster name as its supervisor sees it, or as a probe finds
// it now when no supervisor runs.
func Status(ctx context.Context, root, name string) (*State, *Health, []ComponentStatus, error) {
	s, exists, err := Load(root, name)
	if err != nil {
		return nil, nil, nil, err
	}
	if !exists {
		return nil, nil, nil, fmt.Errorf("no cluster %q under %s (run `kueuelab cluster up --name %s`)", name, filepath.Dir(s.Dir), name)
	}
	p, err := ensurePKIReadOnly(s.path("pki"))
	if err != nil {
		return nil, nil, nil, err
	}
	specs, err := s.specs(s.binaries(), p)
	if err != nil {
		return nil, nil, nil, err
	}
	h, err := ReadHealth(s.Dir)
	if err != nil && !errors.Is(err, ErrNoSupervisor) {
		return nil, nil, nil, err
	}
	if h == nil {
		h = &Health{Cluster: s.Name}
	}
	var rows []ComponentStatus
	names := Components()
	if s.kindMode() {
		// Pods of the real node there, not processes.
		names = slices.DeleteFunc(names, func(n string) bool { return n == Kueue || n == Scheduler })
	}
	for _, c := range h.Components {
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	for _, n := range names {
		c, supervised := h.Component(n)
		if !h.Supervisor.Alive {
			// Nobody keeps the status current: look at the process and probe it now.
			c = ComponentHealth{Name: n, Restarts: c.Restarts, LastExit: c.LastExit, LastRestart: c.LastRestart, State: StateStopped}
			if sp, ok := specs[n]; ok {
				if pid, running := s.running(n, sp.bin); running {
					c.PID, c.State = pid, StateReady
					if err := sp.health(ctx); err != nil {
						c.State, c.Message = StateUnready, err.Error()
					}
				}
			}
		} else if !supervised {
			c = ComponentHealth{Name: n, State: StateStopped, Message: "not started by this cluster's supervisor"}
		}
		row := ComponentStatus{ComponentHealth: c}
		if c.PID > 0 {
			row.RSSKB = rssKB(c.PID)
		}
		rows = append(rows, row)
	}
	return s, h, rows, nil
}

// PrintStatus writes the status table, the supervisor and the stack's total RSS.
func PrintStatus(w io.Writer, s *State, h *Health, rows []ComponentStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "COMPONENT\tSTATE\tPID\tRESTARTS\tLAST EXIT\tRSS\tDETAIL\n")
	var total int64
	for _, r := range rows {
		pid := "-"
		if r.PID > 0 {
			pid = fmt.Sprint(r.PID)
		}
		rss := "-"
		if r.RSSKB > 0 {
			rss = fmt.Sprintf("%d MB", r.RSSKB/1024)
			total += r.RSSKB
		}
		last := "-"
		if r.LastExit != nil {
			last = r.LastExit.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Name, r.State, pid, r.Restarts, last, rss, oneLine(r.Message, 80))
	}
	tw.Flush()
	sup := h.Supervisor
	switch {
	case sup.Alive && sup.InProcess:
		fmt.Fprintf(w, "supervisor: pid %d (inside the program that brought the cluster up), since %s\n", sup.PID, sup.Started.Local().Format(time.DateTime))
	case sup.Alive:
		fmt.Fprintf(w, "supervisor: pid %d, since %s; log %s\n", sup.PID, sup.Started.Local().Format(time.DateTime), s.logFile("supervisor"))
	default:
		fmt.Fprintf(w, "supervisor: not running, nothing restarts a component that exits (`kueuelab cluster up --name %s` starts it)\n", s.Name)
	}
	fmt.Fprintf(w, "total RSS %d MB; kubeconfig %s\n", total/1024, s.Kubeconfig())
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	return s
}

// Healthy reports whether every component is ready.
func Healthy(rows []ComponentStatus) bool {
	for _, r := range rows {
		if r.State != StateReady {
			return false
		}
	}
	return true
}
